// Live updates for the inbox and decision pages.
// 1. Reconnect whenever the socket closes: htmx's ws extension retries only abnormal closes, but a
//    server restart ("going away", 1001) must not leave a reviewer's page silently stale.
// 2. The inbox socket sends the whole list on connect, so a reconnect catches up from the database.
//    Right after a page load that list is usually what the page already shows: skip swapping it in
//    then (same fingerprint), so nothing flickers or moves under the pointer.
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
    if (HTMX_RETRIES.indexOf(code) >= 0 || !elt.isConnected) return;
    var wrapper = event.detail.socketWrapper;
    var delay = Math.random() * Math.min(30000, 1000 * Math.pow(2, attempts));
    attempts += 1;
    setTimeout(function () { if (elt.isConnected) wrapper.reconnect(); }, delay);
  });

  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var root = event.target;
    if (!root.matches || !root.matches("[data-inbox]") || inboxOpens !== 1 || root.dataset.caughtUp) return;
    root.dataset.caughtUp = "true"; // only the first message after the first connection
    var found = /data-fingerprint="([0-9a-f]+)"/.exec(event.detail.message || "");
    if (found && found[1] === root.dataset.fingerprint) event.preventDefault();
  });
})();
