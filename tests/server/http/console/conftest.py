"""The fixture of the console's tests: the HTTP application with its console
over in-process services (a real store, core and committer), with permissions
on (``root`` administers; ``alice`` logs in with ``alice-token``) and a clock
the test moves (``Site.now``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from http_kit import IDLE, LIFETIME, Site, operations_app
from metrics_kit import sources_of
from server.client.kit import enable_permissions, open_services

from qmgr.server.client.handlers.replies import queue_info
from qmgr.server.client.operations import Operations
from qmgr.server.http.console import console as make_console
from storage import QueueKind
from wire import client as cf


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async with open_services(tmp_path / "s") as services:
        core = services.core

        def queue_infos() -> tuple[cf.QueueInfo, ...]:
            return tuple(
                queue_info(q, core.holds.count(q.queue_id))
                for q in core.queues.all()
                if q.kind is not QueueKind.OUTGOING
            )

        services.queue_infos = queue_infos
        services.status = lambda: cf.StatusInfo(
            qm_name="test",
            qm_guid=services.qm_guid,
            server_version="test",
            started_at=time.time() - 5,
            connections=0,
            open_transactions=len(core.transactions),
            commits=core.tally.commits,
            aborts=core.tally.aborts,
            batches=0,
            uncommitted_bytes=0,
            erasing=0,
            queues=queue_infos(),
        )
        operations = Operations(services)
        authorization = enable_permissions(services)  # root administers; alice has a token
        app = operations_app(authorization, operations)
        sources = sources_of(
            core.store,
            tmp_path,
            core=core,
            tally=authorization.tally,
            connections=lambda: {"client": 0},
        )
        now = [1000.0]
        console = make_console(
            host=app,
            operations=operations,
            sources=sources,
            idle_timeout=IDLE,
            lifetime=LIFETIME,
            clock=lambda: now[0],
        )
        app.serve_console(console.starlette_routes())
        yield Site(app, console, services, operations, now)
