"""Reads multipart/form-data requests with Python's email parser and Pillow (not the relay's code).

stdin: one JSON object per line, {"content_type": ..., "body": base64}. stdout: one JSON object per request with its
text fields, and for each file its filename, content type and, when it is an image, the format and size Pillow reads.
"""
import base64
import io
import json
import sys
from email.parser import BytesParser
from email.policy import HTTP

from PIL import Image


def read(content_type, body):
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    fields, files = {}, {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        filename = part.get_filename()
        if filename is None:
            fields[name] = data.decode()
            continue
        described = {"filename": filename, "type": part.get_content_type(), "bytes": len(data)}
        try:
            image = Image.open(io.BytesIO(data))
            described.update(format=image.format, size=list(image.size))
        except Exception as error:  # not an image: said, not hidden
            described["error"] = str(error)
        files[name] = described
    return {"multipart": message.is_multipart(), "fields": fields, "files": files}


for line in sys.stdin:
    if line.strip():
        request = json.loads(line)
        print(json.dumps(read(request["content_type"], base64.b64decode(request["body"]))))
