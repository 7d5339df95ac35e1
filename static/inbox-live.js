// Live updates for the inbox, decision and thread pages.
// 1. Reconnect whenever the socket closes: htmx's ws extension retries only abnormal closes, but a
//    server restart ("going away", 1001) must not leave a reviewer's page silently stale.
// 2. The inbox socket sends the whole list on connect, so a reconnect catches up from the database.
//    Right after a page load that list is usually what the page already shows: skip swapping it in
//    then (same fingerprint), so nothing flickers or moves under the pointer.
// 3. A socket the server closes for good (4401 signed out, 4403 no access, 4404 no such page) is
//    not retried: the page says so and stops offering what can no longer be done. A reconnect the
//    server refuses reaches the browser as 1006, like an outage: the page itself is asked then.
(function () {
  "use strict";
  var HTMX_RETRIES = [1006, 1011, 1012, 1013];
  var attempts = 0;
  var inboxOpens = 0;

  document.addEventListener("htmx:wsOpen", function (event) {
    attempts = 0;
    if (event.target.matches && event.target.matches("[data-inbox]")) inboxOpens += 1;
  });

  document.addEventListener("htmx:wsClose", function (event) {
    var elt = event.target;
    var code = event.detail.event && event.detail.event.code;
    // The server ended it on purpose (thread deleted: _thread_deleted.html's badge): nothing to retry.
    if (!elt.isConnected || document.getElementById("live-ended")) return;
    if (code >= 4400 && code < 4500) {
      endLive(elt, code === 4401 ? "signed-out" : "forbidden");
      return;
    }
    if (code === 1006) probe(elt);
    if (HTMX_RETRIES.indexOf(code) >= 0) return;
    var wrapper = event.detail.socketWrapper;
    var delay = Math.random() * Math.min(30000, 1000 * Math.pow(2, attempts));
    attempts += 1;
    setTimeout(function () { if (elt.isConnected) wrapper.reconnect(); }, delay);
  });

  // Whether the page still exists for this user: 403/404, or the login page, mean it does not.
  function probe(root) {
    fetch(location.href, { credentials: "same-origin", redirect: "manual", cache: "no-store" })
      .then(function (response) {
        if (response.type === "opaqueredirect") endLive(root, "signed-out");
        else if (response.status === 403 || response.status === 404) endLive(root, "forbidden");
      })
      .catch(function () { /* the server is down: htmx keeps retrying */ });
  }

  function endLive(root, reason) {
    if (!root.isConnected) return;
    root.querySelectorAll(".decide, .shortcuts, .controls, [data-deadline], form[method=post]").forEach(function (el) {
      el.remove();
    });
    var notice = root.querySelector("[data-live-gone]");
    if (notice) {
      var why = notice.querySelector('[data-gone-reason="' + reason + '"]');
      if (why) why.hidden = false;
      notice.classList.add("alert", "warn");
      notice.hidden = false;
    }
    var badge = document.getElementById("live-status");
    if (badge) {
      badge.id = "live-ended"; // gatehouse.js no longer calls it "reconnecting"
      badge.hidden = false;
      badge.classList.add("offline");
      badge.textContent = notice ? "live updates ended" : "live updates ended — reload the page";
    }
    // htmx retries a socket as long as its element is on the page: a copy without one takes its place.
    var quiet = root.cloneNode(true);
    quiet.removeAttribute("ws-connect");
    root.replaceWith(quiet);
    if (window.htmx) window.htmx.process(quiet);
  }

  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var root = event.target;
    if (!root.matches || !root.matches("[data-inbox]") || inboxOpens !== 1 || root.dataset.caughtUp) return;
    root.dataset.caughtUp = "true"; // only the first message after the first connection
    var found = /data-fingerprint="([0-9a-f]+)"/.exec(event.detail.message || "");
    if (found && found[1] === root.dataset.fingerprint) event.preventDefault();
  });
})();

// What a push changes is read out from the page's polite live region (_announce.html), never by moving
// the focus: a new inbox row, and a decision someone else made on the request this page shows.
(function () {
  "use strict";
  var before = null;

  function say(text) {
    var region = document.querySelector("[data-announce]");
    if (region && text) region.textContent = text;
  }

  function snapshot() {
    return {
      rows: Array.prototype.map.call(document.querySelectorAll("#inbox-list .inbox-row"), function (r) { return r.id; }),
      closed: !!document.querySelector("[data-decision] .panel .closed"),
    };
  }

  document.addEventListener("htmx:wsBeforeMessage", function () { before = snapshot(); });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!before) return;
    var was = before;
    before = null;
    var added = Array.prototype.filter.call(document.querySelectorAll("#inbox-list .inbox-row"), function (r) {
      return was.rows.indexOf(r.id) < 0;
    });
    if (added.length === 1) say("New request: " + added[0].querySelector(".row-link").textContent.trim());
    else if (added.length > 1) say(added.length + " new requests");
    var closed = document.querySelector("[data-decision] .panel .closed strong");
    if (closed && !was.closed) say(closed.textContent.trim());
  });
})();
