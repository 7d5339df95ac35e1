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
// the focus. The server writes the words: a new inbox row's link, why a row left or came back (pushed
// into #announce-queue), an element whose data-announce-text changed (the thread's status, a request's
// decision), a decision someone else made on the request this page shows. A burst of pushes is said
// once, when it settles, and what changed back within it is not said at all. The inbox compares the
// rows it showed with those it shows, so a full re-render (a reconnect, a resync, a burst past the
// limit) is said like a row's own push; a row that left with no word from the server is still said.
(function () {
  "use strict";
  var QUIET_MS = 400, MAX_MS = 2000;
  var before = null, burst = null, timer = null;

  function rowIds() {
    return Array.prototype.map.call(document.querySelectorAll("#inbox-list .inbox-row"), function (r) { return r.id; });
  }
  function texts() {
    var seen = {};
    document.querySelectorAll("[data-announce-key]").forEach(function (el) {
      seen[el.dataset.announceKey] = el.dataset.announceText || "";
    });
    return seen;
  }
  function snapshot() {
    return { rows: rowIds(), texts: texts(), closed: !!document.querySelector("[data-decision] .panel .closed") };
  }

  // The server's words on rows, by row id: why one left ("" when there is nothing to say: your own
  // decision, a row past the limit), and why one came back (an undo). The latest word on a row wins.
  function takeNotes() {
    var queue = document.getElementById("announce-queue");
    if (!queue) return;
    queue.querySelectorAll("[data-left]").forEach(function (el) {
      burst.left["approval-" + el.dataset.left] = el.hasAttribute("data-quiet") ? "" : el.textContent.trim();
    });
    queue.querySelectorAll("[data-back]").forEach(function (el) {
      burst.back["approval-" + el.dataset.back] = el.textContent.trim();
    });
    queue.replaceChildren();
  }

  function rowsSaid(was, rows, region) {
    var inbox = document.querySelector("[data-inbox]"), parts = [];
    if (!inbox) return parts;
    var added = rows.filter(function (id) { return was.rows.indexOf(id) < 0; });
    var back = added.filter(function (id) { return was.back[id]; });
    var fresh = added.filter(function (id) { return !was.back[id]; });
    var left = was.rows.filter(function (id) { return rows.indexOf(id) < 0 && was.left[id] !== ""; });
    if (fresh.length === 1) {
      parts.push(region.dataset.newOne + " " + document.getElementById(fresh[0]).querySelector(".row-link").textContent.trim());
    } else if (fresh.length > 1) parts.push(fresh.length + " " + region.dataset.newMany);
    if (back.length === 1) parts.push(was.back[back[0]]);
    else if (back.length > 1) parts.push(back.length + " " + inbox.dataset.backMany);
    if (left.length === 1) {
      parts.push(was.left[left[0]] || "Request " + left[0].replace("approval-", "") + " " + inbox.dataset.leftOne);
    } else if (left.length > 1) parts.push(left.length + " " + region.dataset.leftMany);
    return parts;
  }

  function flush() {
    var region = document.querySelector("[data-announce]");
    var was = burst, now = texts(), parts = [];
    burst = null;
    if (!region) return;
    if (was.closed) parts.push(was.closed);
    Object.keys(now).forEach(function (key) {
      if (key in was.texts && now[key] !== was.texts[key] && now[key]) parts.push(now[key]);
    });
    parts = parts.concat(rowsSaid(was, rowIds(), region));
    if (!parts.length) return;
    var text = parts.join(". ");
    // The same words again would not be read again: make them differ, invisibly.
    region.textContent = region.textContent === text ? text + "\u00a0" : text;
  }

  // A page (re)connecting names the rows it shows: the server answers why those it no longer lists left.
  document.addEventListener("htmx:wsOpen", function (event) {
    var wrapper = event.detail && event.detail.socketWrapper;
    if (!wrapper || !event.target.matches || !event.target.matches("[data-inbox]")) return;
    var shown = rowIds().map(function (id) { return parseInt(id.replace("approval-", ""), 10); });
    wrapper.send(JSON.stringify({ shown: shown }));
  });

  document.addEventListener("htmx:wsBeforeMessage", function () { before = snapshot(); });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!before) return;
    var was = before;
    before = null;
    if (!burst) burst = { rows: was.rows, texts: was.texts, closed: "", left: {}, back: {}, start: Date.now() };
    takeNotes();
    var closed = document.querySelector("[data-decision] .panel .closed strong");
    if (closed && !was.closed) burst.closed = closed.textContent.trim();
    clearTimeout(timer);
    timer = setTimeout(flush, Math.max(0, Math.min(QUIET_MS, burst.start + MAX_MS - Date.now())));
  });
})();
