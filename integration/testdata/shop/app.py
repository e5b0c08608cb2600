import http.server, os, subprocess
def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            body = b"ok\n"
        else:
            jobs = run("psql", "-Atc", "select count(*) from jobs_done")
            hits = run("redis-cli", "-h", os.environ["REDIS_HOST"], "incr", "hits")
            body = ("%s jobs=%s hits=%s\n" % (os.environ["GREETING"], jobs, hits)).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer((os.environ.get("LISTEN_HOST", "127.0.0.1"), 8000), H).serve_forever()
