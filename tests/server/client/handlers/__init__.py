"""Tests of the client requests' handlers, a module per handler module."""
