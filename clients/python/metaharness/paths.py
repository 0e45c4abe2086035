"""Where the daemon's socket is, by the rules the `metaharness` client verbs use
(daemon/config/config.cpp, docs/cli.md): $METAHARNESS_SOCKET, else the daemon's default."""

import os


def _env(environ, name):
    value = environ.get(name)
    return value if value else None


def default_socket_path(environ=None):
    """$METAHARNESS_SOCKET; else under systemd ($RUNTIME_DIRECTORY and $STATE_DIRECTORY set)
    $RUNTIME_DIRECTORY/metaharness.sock (its first entry); else for a user ($XDG_RUNTIME_DIR)
    $XDG_RUNTIME_DIR/metaharness/metaharness.sock; else ./metaharness-state/metaharness.sock."""
    environ = os.environ if environ is None else environ
    explicit = _env(environ, "METAHARNESS_SOCKET")
    if explicit:
        return explicit
    runtime = _env(environ, "RUNTIME_DIRECTORY")
    if runtime and _env(environ, "STATE_DIRECTORY"):
        return os.path.join(runtime.split(":", 1)[0], "metaharness.sock")
    xdg = _env(environ, "XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "metaharness", "metaharness.sock")
    return os.path.abspath(os.path.join("metaharness-state", "metaharness.sock"))


def resolve_socket_path(socket_path=None, environ=None):
    return os.fspath(socket_path) if socket_path is not None else default_socket_path(environ)
