"""The receive buffer of the frame decoders: chunks in, whole frames out."""

from __future__ import annotations

from wire.receive_buffer import ReceiveBuffer


def test_a_frame_within_one_chunk_is_read_in_place() -> None:
    buffer = ReceiveBuffer()
    chunk = b"headbody"
    buffer.append(chunk)
    assert len(buffer) == 8
    assert buffer.peek(4) == b"head"
    assert buffer.take(8) is chunk  # the whole chunk, not a copy
    assert len(buffer) == 0
    assert buffer.take(1) is None


def test_a_frame_across_chunks_waits_and_is_joined() -> None:
    buffer = ReceiveBuffer()
    buffer.append(b"ab")
    buffer.append(bytearray(b"cd"))
    buffer.append(memoryview(b"ef"))
    assert buffer.take(7) is None  # consumes nothing
    assert buffer.peek(5) == b"abcde"
    assert buffer.take(3) == b"abc"
    assert buffer.take(3) == b"def"
    assert len(buffer) == 0


def test_view_and_skip() -> None:
    buffer = ReceiveBuffer()
    buffer.append(b"xyz")
    assert buffer.take(1) == b"x"
    data, start, end = buffer.view()
    assert data[start:end] == b"yz"
    buffer.skip(2)
    assert len(buffer) == 0
    buffer.append(b"")
    assert len(buffer) == 0
