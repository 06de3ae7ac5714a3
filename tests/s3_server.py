"""A moto S3 server on loopback that counts the object bytes it sends: what every host read from S3, measured
where S3 answers. The tests' ``s3_server`` fixture and the bench's S3 reads (``bench/s3_reads.py``) both use it."""

from __future__ import annotations

import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


class S3Server:
    """moto's S3 server on loopback (the one ``ThreadedMotoServer`` runs), counting the object bytes it sends:
    what every host read from S3, measured where S3 answers, whoever asked."""

    def __init__(self):
        self.bytes_read = 0
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True, request_handler=MotoRequestHandler)
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.env = {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def _app(self, environ, start_response):
        body = list(self._moto(environ, start_response))
        # An object's bytes: a GET of /<bucket>/<key> (a listing is a GET of the bucket, with a query).
        if environ["REQUEST_METHOD"] == "GET" and environ["PATH_INFO"].strip("/").count("/") >= 1:
            self.bytes_read += sum(len(chunk) for chunk in body)
        return body

    def stop(self):
        self._server.shutdown()
        self._thread.join()
