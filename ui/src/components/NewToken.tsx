import { useState } from "react";
import type { CreatedToken } from "../api/types";

/** A token just created: shown this once, with a button that copies it. */
export function NewToken({ created }: { created: CreatedToken }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard?.writeText(created.token).catch(() => undefined);
    setCopied(true);
  };
  return (
    <div className="card new-token" role="status">
      <p>
        Token <strong>{created.name}</strong> of <strong>{created.user}</strong>. Copy it now: it is not shown again.
      </p>
      <div className="row">
        <input
          readOnly
          value={created.token}
          aria-label="Token value"
          onFocus={(e) => e.target.select()}
          className="token-value"
        />
        <button type="button" onClick={copy}>
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
    </div>
  );
}
