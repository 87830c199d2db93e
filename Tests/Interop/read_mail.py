"""Reads one MIME message from stdin with Python's email package and Pillow (not the relay's code), as a mail client
would, and prints JSON: the top content type, each part's type, the HTML part's text, and each image with its
Content-ID and the size Pillow reads.
"""
import email
import email.policy
import io
import json
import sys

from PIL import Image

message = email.message_from_bytes(sys.stdin.buffer.read(), policy=email.policy.default)
out = {"type": message.get_content_type(), "parts": [], "html": "", "images": []}
for part in message.walk():
    if part.is_multipart():
        continue
    out["parts"].append(part.get_content_type())
    if part.get_content_type() == "text/html":
        out["html"] = part.get_content()
    elif part.get_content_maintype() == "image":
        image = Image.open(io.BytesIO(part.get_content()))
        out["images"].append({"cid": part["content-id"], "format": image.format, "size": list(image.size)})
print(json.dumps(out))
