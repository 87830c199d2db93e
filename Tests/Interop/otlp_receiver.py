"""A small OpenTelemetry collector for the tests: receives OTLP/HTTP trace exports (protobuf or JSON, gzip or not)
with the OpenTelemetry project's own protobuf definitions (opentelemetry-proto), and lists the spans it got.

  POST /v1/traces   an ExportTraceServiceRequest; answered with an ExportTraceServiceResponse
  GET  /spans       every span received so far, as a JSON array of plain objects
Prints "listening PORT" once it serves. With --decode: one request as hex on stdin, its spans on stdout."""
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

spans = []
lock = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def flatten(request):
    out = []
    for resource_spans in request.resource_spans:
        resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append({
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind),
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {a.key: value(a.value) for a in span.attributes},
                    "status": Status.StatusCode.Name(span.status.code),
                    "status_message": span.status.message,
                    "trace_state": span.trace_state,
                    "flags": span.flags,
                    "events": [{"name": e.name, "time": e.time_unix_nano,
                                "attributes": {a.key: value(a.value) for a in e.attributes}} for e in span.events],
                    "service": resource.get("service.name"),
                })
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        content_type = self.headers.get("Content-Type", "")
        try:
            if content_type.startswith("application/json"):
                json_format.Parse(body, request)
            else:
                request.ParseFromString(body)
        except Exception as error:  # a malformed export is the exporter's bug: say so
            self.send_error(400, f"not an ExportTraceServiceRequest: {error}")
            return
        with lock:
            spans.extend(flatten(request))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):
        if self.path != "/spans":
            self.send_error(404)
            return
        with lock:
            answer = json.dumps(spans).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


if __name__ == "__main__":
    if sys.argv[1:] == ["--decode"]:
        # One request as hex on stdin (from a unit test), its spans as JSON on stdout.
        request = ExportTraceServiceRequest()
        request.ParseFromString(bytes.fromhex(sys.stdin.read().strip()))
        print(json.dumps({"spans": flatten(request), "resource": [
            {a.key: value(a.value) for a in rs.resource.attributes} for rs in request.resource_spans]}))
        sys.exit(0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    sys.stdout.close()
    server.serve_forever()
