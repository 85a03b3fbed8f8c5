// qmgr console: refresh the live region of a page (main[data-refresh]) by
// fetching the same URL with the X-Console-Fragment header, which answers
// with that region alone. No library, no build step.
(function () {
  "use strict";
  var main = document.getElementById("live");
  if (!main) { return; }
  var every = Number(main.getAttribute("data-refresh") || 0);
  if (!every) { return; }
  var stamp = document.getElementById("updated");
  var busy = false;
  // A refresh still unanswered after this long is given up and the page marked
  // stale: a queue manager that hangs (stopped, or its loop blocked) keeps the
  // connection open, and without a limit the page would show old figures as
  // current for as long as it hangs.
  var patience = Math.max(3 * every, 5000);

  function typing() {
    var active = document.activeElement;
    return active && main.contains(active) &&
      (active.tagName === "INPUT" || active.tagName === "SELECT" || active.tagName === "TEXTAREA");
  }

  function refresh() {
    if (busy || document.hidden || typing()) { return; }
    busy = true;
    var control = new AbortController();
    var timer = window.setTimeout(function () { control.abort(); }, patience);
    fetch(window.location.href, {
      headers: { "X-Console-Fragment": "1" },
      credentials: "same-origin",
      cache: "no-store",
      redirect: "manual",
      signal: control.signal
    }).then(function (response) {
      if (response.status === 200) {
        return response.text().then(function (text) {
          main.innerHTML = text;
          main.classList.remove("stale");
          if (stamp) { stamp.textContent = "updated " + new Date().toLocaleTimeString(); }
        });
      }
      if (response.status === 401 || response.type === "opaqueredirect") {
        window.location.reload();  // the session ended: the login form
        return undefined;
      }
      main.classList.add("stale");
      if (stamp) { stamp.textContent = "not updated: " + response.status; }
      return undefined;
    }).catch(function () {
      main.classList.add("stale");
      if (stamp) {
        stamp.textContent = control.signal.aborted
          ? "not updated: the queue manager has not answered for " + patience / 1000 + " s"
          : "not updated: the queue manager does not answer";
      }
    }).then(function () {
      window.clearTimeout(timer);
      busy = false;
    });
  }

  window.setInterval(refresh, every);
}());
