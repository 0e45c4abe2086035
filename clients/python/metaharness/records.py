"""Replies as objects: a dict whose keys read as attributes too, every field kept (a field a
newer daemon adds is there, under its own name)."""


class Record(dict):
    """A JSON object from the daemon. `r.state` and `r["state"]` are the same; nested objects are
    Records too. Missing keys raise AttributeError / KeyError: null is None, absent is absent."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("a Record is read-only; copy it with dict(record)")

    @classmethod
    def wrap(cls, value):
        if isinstance(value, dict) and not isinstance(value, Record):
            return cls({k: cls.wrap(v) for k, v in value.items()})
        if isinstance(value, list):
            return [cls.wrap(v) for v in value]
        return value
