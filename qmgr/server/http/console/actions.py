"""The console's actions (every ``POST``) and its login.

Theory of operation
-------------------
An action reaches here only with its session's CSRF token (``site``).
Each makes the client request that does what it says, through the visit's
``ApiCall`` (authorized with the request's need; the handler's event, such
as ``queue_purged`` or ``messages_moved``, is logged with the principal
bound), logs ``console_action`` with what was asked, leaves a notice for
the next page, and sends the browser there (``303``, so that a reload does
not do it again). A refusal is a page with its status; nothing was done.

The login form (``GET`` and ``POST /console/login``) takes a token and
opens a session (``site.Console.log_in``); ``POST /console/logout`` ends
it on the server at once.
"""

from __future__ import annotations

from starlette.responses import Response

from qmgr.client import OutgoingInfo
from qmgr.texts import plural
from wire import client as cf

from ...client.operations import OutgoingAction
from ..api import ApiError
from .site import COOKIE, PREFIX, Console, Visit, form_field

__all__ = [
    "control_outgoing",
    "log_out",
    "login",
    "login_form",
    "move_back",
    "purge",
    "resolve",
]


async def login_form(site: Console, visit: Visit) -> Response:
    """The login form (a token)."""
    return site.render(visit, "login.html", title="Log in", failed=False)


async def login(site: Console, visit: Visit) -> Response:
    """Check the token and open a session, or say it was not accepted (``401``)."""
    session = site.log_in(visit, visit.form.get("token", "").strip())
    if session is None:
        return site.render(visit, "login.html", http_status=401, title="Log in", failed=True)
    visit.session = session
    response = site.redirect("")
    site.set_cookie(response, visit)
    return response


async def log_out(site: Console, visit: Visit) -> Response:
    """End the session on the server and forget the cookie."""
    site.sessions.close(visit.session.session_id)
    visit.log.info("console_logout")
    response = site.redirect("/login")
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


async def purge(site: Console, visit: Visit) -> Response:
    """Purge a queue (after the confirmation page)."""
    name = form_field(visit.form, "name")
    done = await visit.call.run(cf.PurgeQueue(name=name), cf.Ok)
    visit.log.info("console_action", action="purge", queue=name, purged=done.value)
    visit.notice(f"Purged {plural(done.value, 'message')} from {name}.")
    return site.redirect("/queue", name=name)


async def move_back(site: Console, visit: Visit) -> Response:
    """Move one message (``lookup_id``) or all (``all``) of a dead-letter queue or
    poison subqueue back: a poison subqueue's to its queue, a dead letter to its
    original destination, keeping its id, each move atomic."""
    source = form_field(visit.form, "queue")
    target = visit.form.get("target", "")
    every = visit.form.get("all") == "1"
    lookup_id = 0 if every else visit.number(form_field(visit.form, "lookup_id"), "lookup_id", 1)
    asked = cf.MoveMessages(source=source, target=target, lookup_id=lookup_id, all=every)
    moved = await visit.call.run(asked, cf.Moved)
    where = target or "their original queues"
    visit.log.info(
        "console_action",
        action="move_back",
        queue=source,
        target=target,
        lookup_id=lookup_id or None,
        moved=moved.count,
    )
    visit.notice(f"Moved {plural(moved.count, 'message')} from {source} back to {where}.")
    return site.redirect("/dead-letters", queue=source)


async def control_outgoing(site: Console, visit: Visit) -> Response:
    """Pause, resume or purge an outgoing queue (``action``)."""
    destination = form_field(visit.form, "destination")
    name = form_field(visit.form, "action")
    actions = {"pause": OutgoingAction.PAUSE, "resume": OutgoingAction.RESUME}
    actions["purge"] = OutgoingAction.PURGE
    action = actions.get(name)
    if action is None:
        raise ApiError(400, "bad_request", "action must be pause, resume or purge")
    asked = cf.ControlOutgoing(action=int(action), destination=destination)
    done = await visit.call.run(asked, cf.OutgoingList)
    state = OutgoingInfo.from_wire(done.outgoing[0]).state
    visit.log.info("console_action", action=f"outgoing_{name}", destination=destination)
    said = f"Outgoing queue to {destination}: {state}"
    if action is OutgoingAction.PURGE:
        said += f", {plural(done.purged, 'message')} purged"
    visit.notice(said + ".")
    return site.redirect("/outgoing")


async def resolve(site: Console, visit: Visit) -> Response:
    """Commit or abort a transaction in doubt (``decision``)."""
    xid = form_field(visit.form, "xid")
    decision = form_field(visit.form, "decision")
    if decision not in ("commit", "abort"):
        raise ApiError(400, "bad_request", "decision must be commit or abort")
    asked = cf.Resolve(xids=(xid,), commit=decision == "commit")
    done = await visit.call.run(asked, cf.Resolutions)
    outcome = cf.Resolution(done.outcomes[0]).name.lower()
    visit.log.info("console_action", action=decision, xid=xid, resolution=outcome)
    visit.notice(f"Transaction {xid}: {outcome}.")
    return site.redirect("/transactions")
