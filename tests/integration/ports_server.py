# The server the ports tests run in a sandbox (python3, standard library
# only; started as `python3 ports_server.py PORT`): it echoes WebSocket
# messages (text and binary, any size; a close answered), streams N bytes of
# a known pattern (/big?n=N, with a Content-Length, or &chunked=1), answers
# /cookies with two Set-Cookie headers, caching headers and a hop-by-hop
# one, and "up" to anything else. Used by test_ports.py, test_ports_ws.py and
# the TypeScript client's ports-ws.test.mjs; the Python tests also import its
# WebSocket framing (frame, read_frame, read_head) for their own clients.
import base64, hashlib, socket, struct, sys, threading
BLOCK = bytes(range(256)) * 256
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
class Conn:
    def __init__(self, c, rest):
        self.c, self.buf = c, rest
    def exact(self, n):
        while len(self.buf) < n:
            d = self.c.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out
def masked(data, mask):
    """data XOR the 4-byte mask (data itself when there is no mask)."""
    return bytes(x ^ mask[i % 4] for i, x in enumerate(data)) if mask else data
def frame(op, data, mask=b""):
    """One final frame; masked (as a client sends it) when mask is 4 bytes."""
    bit, n = 0x80 if mask else 0, len(data)
    hdr = bytes([0x80 | op])
    if n < 126:
        hdr += bytes([bit | n])
    elif n < 65536:
        hdr += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        hdr += bytes([bit | 127]) + struct.pack(">Q", n)
    return hdr + mask + masked(data, mask)
def read_frame(r):
    """(opcode, payload) of the next frame from r (a Conn), unmasked."""
    b0, b1 = r.exact(2)
    n = b1 & 127
    if n == 126:
        n = struct.unpack(">H", r.exact(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", r.exact(8))[0]
    mask = r.exact(4) if b1 & 0x80 else b""
    return b0 & 15, masked(r.exact(n), mask)
def read_head(c):
    """What c sends up to its head's blank line (less when it ends before)."""
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d:
            break
        head += d
    return head
def echo(c, key, rest):
    acc = base64.b64encode(hashlib.sha1(key + GUID).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: " + acc + b"\r\nX-Echo: ws\r\n\r\n")
    r = Conn(c, rest)
    while True:
        op, data = read_frame(r)
        if op == 8:
            c.sendall(b"\x88\x02\x03\xe8")
            return
        c.sendall(frame(op, data))
def big(c, n, chunked):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n" +
              (b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: %d\r\n" % n) +
              b"Connection: close\r\n\r\n")
    while n > 0:
        b = BLOCK[:min(n, len(BLOCK))]
        c.sendall(b"%x\r\n" % len(b) + b + b"\r\n" if chunked else b)
        n -= len(b)
    if chunked:
        c.sendall(b"0\r\n\r\n")
def serve(c):
    try:
        head = read_head(c)
        if b"\r\n\r\n" not in head:
            return
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        path = lines[0].split()[1].decode()
        keys = [l.split(b":", 1)[1].strip() for l in lines if l.lower().startswith(b"sec-websocket-key:")]
        if keys:
            echo(c, keys[0], rest)
        elif path.startswith("/big"):
            q = dict(x.split("=", 1) for x in path.split("?", 1)[1].split("&"))
            big(c, int(q["n"]), q.get("chunked") == "1")
        elif path == "/cookies":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nSet-Cookie: a=1; Path=/\r\n"
                      b"Set-Cookie: b=2; HttpOnly\r\nCache-Control: max-age=60\r\nETag: \"v1\"\r\n"
                      b"Transfer-Encoding: chunked\r\nConnection: close, X-Hop\r\nX-Hop: secret\r\n\r\n"
                      b"6\r\nhello \r\n6\r\nchunks\r\n0\r\n\r\n")
        else:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nup")
    except (EOFError, OSError):
        pass
    finally:
        c.close()
def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
if __name__ == "__main__":
    main()
