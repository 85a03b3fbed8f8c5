"""Configuration: embedded defaults, then a TOML file, then command-line flags.

The defaults are ``qmgr/default_config.toml`` (the same text as the shipped
``config/qmgr.toml``). A file given with ``--config`` overrides them key by
key, and flags override both. Unknown keys are errors, so that a typo in a
production config is reported instead of silently ignored.
"""

from __future__ import annotations

import socket
import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """The configuration is invalid; the message says which key and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Address:
    """A ``HOST:PORT`` listening address."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, *, what: str) -> Address:
        """Parse ``HOST:PORT`` (``[v6]:PORT`` for IPv6)."""
        host, sep, port_text = text.rpartition(":")
        if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
            msg = f"{what}: expected HOST:PORT, got {text!r}"
            raise ConfigError(msg)
        host = host.strip("[]") or "0.0.0.0"
        return cls(host=host, port=int(port_text))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """Everything ``qmgr serve`` needs."""

    name: str
    data_dir: Path
    listen: Address
    client_listen: Address
    max_connections: int
    log_format: str
    log_level: str
    tx_idle_timeout: float
    tx_max_operations: int
    tx_max_bytes: int
    initial_map_size: int
    max_map_size: int | None


_SCHEMA: dict[str, dict[str, type]] = {
    "server": {
        "name": str,
        "data_dir": str,
        "listen": str,
        "client_listen": str,
        "max_connections": int,
    },
    "log": {"format": str, "level": str},
    "transactions": {"idle_timeout": float, "max_operations": int, "max_bytes": int},
    "store": {"initial_map_size": int, "max_map_size": int},
}


def default_config_text() -> str:
    """The embedded default configuration file."""
    return resources.files("qmgr").joinpath("default_config.toml").read_text(encoding="utf-8")


def load_config(path: Path | None = None, **overrides: Any) -> Config:
    """Build the configuration.

    Args:
        path: a TOML file overriding the embedded defaults, or None.
        overrides: flag values (None means "not given"): name, data_dir,
            listen, client_listen, log_format, log_level.

    Raises:
        ConfigError: unreadable file, unknown key, wrong type or bad value.
    """
    values = _parse(default_config_text(), "embedded defaults")
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            msg = f"cannot read config file {path}: {exc.strerror}"
            raise ConfigError(msg) from exc
        for section, items in _parse(text, str(path)).items():
            values[section].update(items)
    server, log, tx, store = (values[s] for s in ("server", "log", "transactions", "store"))
    config = Config(
        name=server["name"] or socket.gethostname(),
        data_dir=Path(server["data_dir"]),
        listen=Address.parse(server["listen"], what="server.listen"),
        client_listen=Address.parse(server["client_listen"], what="server.client_listen"),
        max_connections=server["max_connections"],
        log_format=log["format"],
        log_level=log["level"],
        tx_idle_timeout=float(tx["idle_timeout"]),
        tx_max_operations=tx["max_operations"],
        tx_max_bytes=tx["max_bytes"],
        initial_map_size=store["initial_map_size"],
        max_map_size=store["max_map_size"] or None,
    )
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        if key in ("listen", "client_listen"):
            value = Address.parse(value, what=f"--{key.replace('_', '-')}")
        elif key == "data_dir":
            value = Path(value)
        changes[key] = value
    config = replace(config, **changes)
    _validate(config)
    return config


def _parse(text: str, origin: str) -> dict[str, dict[str, Any]]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{origin}: {exc}"
        raise ConfigError(msg) from exc
    result: dict[str, dict[str, Any]] = {section: {} for section in _SCHEMA}
    for section, items in raw.items():
        if section not in _SCHEMA or not isinstance(items, dict):
            msg = f"{origin}: unknown section [{section}]"
            raise ConfigError(msg)
        for key, value in items.items():
            expected = _SCHEMA[section].get(key)
            if expected is None:
                msg = f"{origin}: unknown key {section}.{key}"
                raise ConfigError(msg)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or isinstance(value, bool):
                msg = f"{origin}: {section}.{key} must be {expected.__name__}, not {value!r}"
                raise ConfigError(msg)
            result[section][key] = value
    return result


def _validate(config: Config) -> None:
    if config.log_format not in ("auto", "console", "json"):
        msg = f"log format must be auto, console or json, not {config.log_format!r}"
        raise ConfigError(msg)
    if config.log_level not in ("debug", "info", "warning", "error"):
        msg = f"log level must be debug, info, warning or error, not {config.log_level!r}"
        raise ConfigError(msg)
    positive = {
        "max_connections": config.max_connections,
        "transactions.idle_timeout": config.tx_idle_timeout,
        "transactions.max_operations": config.tx_max_operations,
        "transactions.max_bytes": config.tx_max_bytes,
        "store.initial_map_size": config.initial_map_size,
    }
    for key, value in positive.items():
        if value <= 0:
            msg = f"{key} must be positive, not {value}"
            raise ConfigError(msg)
