"""An OTLP/HTTP trace receiver for tests/it/interop/traces.rs: takes POST /v1/traces
(protobuf), decodes it with the official definitions (opentelemetry-proto), and appends
each span as a JSON line to the file given: its trace and span ids, its parent, name,
kind, attributes and status. Listens on 127.0.0.1:PORT until killed."""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def main():
    port, out = int(sys.argv[1]), sys.argv[2]

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with open(out, "a") as spans:
                for resource in request.resource_spans:
                    service = {a.key: value_of(a.value) for a in resource.resource.attributes}
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            spans.write(json.dumps({
                                "service": service.get("service.name"),
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "name": span.name,
                                "kind": span.kind,
                                "attributes": {a.key: value_of(a.value) for a in span.attributes},
                                "status": span.status.code,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                            }) + "\n")
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    HTTPServer(("127.0.0.1", port), Receiver).serve_forever()


if __name__ == "__main__":
    main()
