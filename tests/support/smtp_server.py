"""A real SMTP server for the e-mail alert tests (aiosmtpd).

Usage: smtp_server.py PORT [CERT KEY USER PASSWORD]
With a certificate it requires STARTTLS and then AUTH (USER, PASSWORD) before it takes
mail. Each message taken is printed as one JSON line on stdout; "ready" is printed first.
"""

import json
import ssl
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Printer:
    async def handle_DATA(self, server, session, envelope):
        print(json.dumps({
            "from": envelope.mail_from,
            "to": envelope.rcpt_tos,
            "content": envelope.content.decode("utf-8", "replace"),
        }), flush=True)
        return "250 OK"


def main():
    port = int(sys.argv[1])
    kwargs = {}
    if len(sys.argv) > 2:
        cert, key, user, password = sys.argv[2:6]
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)

        def authenticator(server, session, envelope, mechanism, data):
            ok = (isinstance(data, LoginPassword)
                  and data.login == user.encode() and data.password == password.encode())
            return AuthResult(success=ok)

        kwargs = dict(tls_context=context, require_starttls=True, auth_required=True,
                      authenticator=authenticator)
    controller = Controller(Printer(), hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


main()
