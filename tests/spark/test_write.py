"""The writer's transaction ids and query ids (``qmgr.spark._write``), without Spark."""

from __future__ import annotations

from qmgr.spark._write import _batch_of, query_id_from_checkpoint


def test_batch_of_xid() -> None:
    assert _batch_of("spark:6f1c:17:3:abcdef") == 17
    assert _batch_of("spark:6f1c") == -1


def test_query_id_from_checkpoint(tmp_path: object) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path))
    assert query_id_from_checkpoint(str(directory)) is None
    (directory / "metadata").write_text('{"id":"6f1c-query"}', encoding="utf-8")
    assert query_id_from_checkpoint(str(directory)) == "6f1c-query"
    assert query_id_from_checkpoint(f"file://{directory}") == "6f1c-query"
    assert query_id_from_checkpoint("hdfs://nn/ckpt") is None
