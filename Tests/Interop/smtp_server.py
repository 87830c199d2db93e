"""A real SMTP server from PyPI (aiosmtpd) for the e-mail sink's tests: STARTTLS required, a login required.

Usage: smtp_server.py OUTDIR CERT KEY USER PASSWORD [--refuse]. Prints `listening PORT`. Each accepted mail is
written to OUTDIR as N.json: {"from", "to", "authenticated", "tls", "message" (as received), "subject", "messageId",
"parts": {content type: decoded text}}. With --refuse
every recipient is refused (550).
"""

import email
import email.policy
import json
import os
import socket
import ssl
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Handler:
    def __init__(self, out, refuse):
        self.out, self.refuse, self.count = out, refuse, 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.refuse:
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        record = {
            "from": envelope.mail_from, "to": envelope.rcpt_tos,
            "authenticated": bool(session.authenticated),
            "tls": session.ssl is not None,
            "message": envelope.original_content.decode("utf-8", "replace"),
        }
        # What a mail client shows: the decoded subject, and each part's text.
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        record["subject"] = str(parsed["subject"])
        record["messageId"] = str(parsed["message-id"])
        record["parts"] = {part.get_content_type(): part.get_content() for part in parsed.walk() if not part.is_multipart()}
        path = os.path.join(self.out, "%03d.json" % self.count)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.rename(path + ".tmp", path)
        return "250 Message accepted for delivery"


def main():
    out, cert, key, user, password = sys.argv[1:6]
    refuse = "--refuse" in sys.argv
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and auth_data.login.decode() == user \
            and auth_data.password.decode() == password
        return AuthResult(success=ok)

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    controller = Controller(Handler(out, refuse), hostname="127.0.0.1", port=port, tls_context=context,
                            require_starttls=True, authenticator=authenticator, auth_required=True,
                            auth_require_tls=True)
    controller.start()
    print("listening %d" % controller.port, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
