"""A blocking Unix-socket connection that reads and writes JSON lines, every wait bounded by the
caller's timeout (None waits as long as it takes)."""

import socket
import time

from . import wire
from .errors import DaemonUnreachable, ProtocolError, Timeout


class LineConnection:
    def __init__(self, path, connect_timeout=10.0):
        self.path = path
        self._buffer = bytearray()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(connect_timeout)
        try:
            sock.connect(path)
        except OSError as e:
            sock.close()
            raise DaemonUnreachable(path, e) from None
        self.sock = sock
        self.closed = False

    def send(self, obj):
        """Raises OSError when the line could not be handed to the kernel whole."""
        if self.closed:
            raise BrokenPipeError("the connection is closed")
        self.sock.settimeout(None)
        self.sock.sendall(wire.encode(obj))

    def read(self, timeout=None):
        """The next line as a dict, or None when the daemon closed the connection. A last line
        with no newline is not a line, and is not returned."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                return wire.decode(line)
            if self.closed:
                return None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Timeout(f"no line from the daemon within {timeout} s")
                self.sock.settimeout(remaining)
            else:
                self.sock.settimeout(None)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                raise Timeout(f"no line from the daemon within {timeout} s") from None
            except OSError:
                data = b""  # reset by the peer, or shut down here: the connection is over
            if not data:
                self.close()
                return None
            self._buffer += data
            if len(self._buffer) > wire.MAX_LINE_BYTES:
                self.close()
                raise ProtocolError(f"a line longer than {wire.MAX_LINE_BYTES} bytes")

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass
