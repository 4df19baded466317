//! An outside system for callback tasks: a plain HTTP server on a loopback port that
//! answers every request 200, keeps each request's body, and (when told to) POSTs a result
//! to the `callback_url` the body carries, as a system that finished its work would.

#![allow(dead_code)] // each test binary uses a different subset

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct CallbackServer {
    pub url: String,
    /// Bodies of the requests received, in order.
    pub received: Arc<Mutex<Vec<Value>>>,
}

impl CallbackServer {
    /// `reply`: the completion it POSTs to the callback URL (None: it never calls back).
    pub fn start(reply: Option<Value>) -> CallbackServer {
        CallbackServer::serve(reply, "ok")
    }

    /// A system that answers every request 200 with `answer` (a chat robot's JSON).
    pub fn answering(answer: &'static str) -> CallbackServer {
        CallbackServer::serve(None, answer)
    }

    fn serve(reply: Option<Value>, answer: &'static str) -> CallbackServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/work", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let seen = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let body = read_body(&mut BufReader::new(&stream));
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                        answer.len()
                    )
                    .as_bytes(),
                );
                drop(stream);
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push(body.clone());
                if let (Some(reply), Some(to)) = (&reply, body["callback_url"].as_str()) {
                    let status = reqwest::blocking::Client::new()
                        .post(to)
                        .header("content-type", "application/json")
                        .body(reply.to_string())
                        .send()
                        .map(|r| r.status().as_u16());
                    eprintln!("callback server: called back {to}: {status:?}");
                }
            }
        });
        CallbackServer { url, received }
    }

    /// A system that refuses every request (500), its answer echoing the request's line
    /// and headers back, as a verbose error page would; returns its URL.
    pub fn refusing() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/work", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = String::new();
                let mut reader = BufReader::new(&stream);
                while reader.read_line(&mut head).unwrap_or(0) > 2 {}
                let answer = format!(
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                    head.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        url
    }

    pub fn requests(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

fn read_body(reader: &mut impl BufRead) -> Vec<u8> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    body
}
