// Keyboard shortcuts for reviewers. Inbox: j/k move, Enter or o opens, c claims/releases, and
// on the selected row a approves, e opens it to edit, r opens it to reject.
// Decision page: a approve, e edit, r reject, c claim/release, j/k next/previous item.
// Approving a consequential action (money, mail) from the keyboard asks to confirm first.
// Keys typed into a field, or with a modifier, are left alone; Escape leaves the field.
(function () {
  "use strict";
  var selectedId = null;
  var approving = null;  // { id, at }: the row being approved from the keyboard, and its place

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#inbox-list .inbox-row")); }

  // The selection is an attribute, not a class: htmx's settle step restores the classes of swapped
  // elements, which would drop it after a live update.
  // `focus`: also move the focus to the row's link, so a screen reader reads the row the keys moved
  // to and the focus ring shows it (a live update's re-selection never moves the focus).
  function select(row, focus) {
    rows().forEach(function (r) { r.removeAttribute("aria-current"); });
    if (!row) { selectedId = null; return; }
    row.setAttribute("aria-current", "true");
    selectedId = row.id;
    row.scrollIntoView({ block: "nearest" });
    var link = row.querySelector(".row-link");
    if (focus && link) link.focus({ preventScroll: true });
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.findIndex(function (r) { return r.id === selectedId; });
    var next = at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(at + step, 0), all.length - 1);
    select(all[next], true);
  }

  function current() { return selectedId ? document.getElementById(selectedId) : null; }

  // After the reviewer's own approval the next row is selected (the previous one at the end).
  // A row someone else decided just drops the selection: an `a` meant for it must not approve
  // a neighbour the reviewer has not read.
  function selectAfter(approved) {
    var from = approving;
    approving = null;
    if (!from || from.id !== approved.id || selectedId !== approved.id) return;  // moved on meanwhile
    var all = rows();
    var at = all.findIndex(function (r) { return r.id === approved.id; });
    if (at >= 0) select(all[at + 1] || all[at - 1] || null, true);
    else select(all[Math.min(from.at, all.length - 1)] || null, true);  // the live update removed it first
  }

  function click(selector, scope) {
    var el = (scope || document).querySelector(selector);
    if (el) { el.click(); return true; }
    return false;
  }

  function openChoice(key) {
    var details = document.querySelector('details[data-key="' + key + '"]');
    if (!details) return;
    details.open = true;
    var field = details.querySelector("input:not([type=hidden]), textarea, select");
    if (field) { field.focus(); if (field.select) field.select(); }
  }

  function follow(nav) {
    var link = document.querySelector('a[data-nav="' + nav + '"]');
    if (link) window.location.href = link.href;
  }

  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }

  // A consequential action asks first: a modal dialog whose confirm button has the focus (Enter).
  // Tab cycles inside it; closing it returns the focus to where it was.
  function confirmed(what, then) {
    var back = document.activeElement;
    var dialog = document.createElement("dialog");
    dialog.className = "confirm-approve";
    dialog.setAttribute("aria-label", "Confirm approval");
    var text = document.createElement("p");
    text.textContent = "Approve " + what + "? This action is marked consequential.";
    text.id = "confirm-approve-text";
    dialog.setAttribute("aria-describedby", text.id);  // read out with the dialog: what is approved
    var yes = document.createElement("button");
    yes.className = "btn approve"; yes.textContent = "Approve"; yes.dataset.confirm = "yes";
    var no = document.createElement("button");
    no.className = "btn subtle"; no.textContent = "Cancel";
    dialog.append(text, yes, no);
    document.body.appendChild(dialog);
    function restore() {
      var row = current();
      var to = back && back.isConnected && back !== document.body ? back : row && row.querySelector(".row-link");
      if (to) to.focus({ preventScroll: true });
    }
    function close() { dialog.close(); dialog.remove(); restore(); }
    yes.addEventListener("click", function () { close(); then(); });
    no.addEventListener("click", close);
    dialog.addEventListener("cancel", function () { dialog.remove(); restore(); });
    dialog.addEventListener("keydown", function (event) {
      if (event.key !== "Tab") return;
      var edge = event.shiftKey ? yes : no;
      if (document.activeElement === edge) { event.preventDefault(); (event.shiftKey ? no : yes).focus(); }
    });
    dialog.showModal();
    yes.focus();
  }

  function notice(text, row, undoUrl) {
    var box = document.getElementById("inbox-notice");
    if (!box) return;
    box.replaceChildren();
    box.hidden = false;
    box.append(document.createTextNode(text + " "));
    var seconds = parseFloat(document.querySelector("[data-undo-s]").dataset.undoS || "0");
    if (undoUrl && seconds > 0) {
      var form = document.createElement("form");
      form.method = "post"; form.action = undoUrl; form.className = "inline";
      form.innerHTML = '<input type="hidden" name="csrfmiddlewaretoken"><input type="hidden" name="next">' +
        '<button class="btn small" data-undo>Undo</button>';
      form.elements.csrfmiddlewaretoken.value = csrfToken();
      form.elements.next.value = window.location.pathname + window.location.search;
      box.append(form);
      setTimeout(function () { if (form.isConnected) form.replaceWith("It has taken effect."); }, seconds * 1000);
    }
  }

  function approveRow(row) {
    var body = new URLSearchParams({ decision: "approve" });
    approving = { id: row.id, at: rows().indexOf(row) };
    fetch(row.dataset.href, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" },
    }).then(function (response) {
      return response.text().then(function (html) {
        var action = row.querySelector(".action").textContent.trim();
        if (response.ok) {
          notice("Approved " + action + ".", row, row.dataset.href.replace(/\/$/, "") + "/undo/");
          selectAfter(row);
        } else {
          approving = null;
          if (!current()) select(null);
          var page = new DOMParser().parseFromString(html, "text/html");
          var alert = page.querySelector(".alert.error");
          notice("Not approved: " + (alert ? alert.textContent.trim() : "status " + response.status), row, "");
        }
      });
    });
  }

  function approveKey(row) {
    var consequential = row ? row.dataset.consequential === "true"
      : !!document.querySelector('button[data-key="a"][data-consequential="true"]');
    var act = row ? function () { approveRow(row); } : function () { click('button[data-key="a"]'); };
    var what = row ? row.querySelector(".action").textContent.trim()
      : (document.querySelector("[data-decision] h1") || {}).textContent;
    if (!row && !document.querySelector('button[data-key="a"]')) return;
    if (consequential) confirmed(what, act); else act();
  }

  function onInbox(key) {
    var row = current();
    if (key === "j") move(1);
    else if (key === "k") move(-1);
    else if ((key === "Enter" || key === "o") && row) window.location.href = row.dataset.href;
    else if (key === "c" && row) click('button[data-key="c"]', row);
    else if (key === "a" && row) approveKey(row);
    else if (key === "e" && row) window.location.href = row.dataset.href + "#edit";
    else if (key === "r" && row) window.location.href = row.dataset.href + "#reject";
    else return false;
    return true;
  }

  // Opened from the inbox with e or r: that choice is open, its first field focused.
  document.addEventListener("DOMContentLoaded", function () {
    if (!document.querySelector("[data-decision]")) return;
    if (window.location.hash === "#edit") openChoice("e");
    else if (window.location.hash === "#reject") openChoice("r");
  });

  function onDecision(key) {
    if (key === "a") approveKey(null);
    else if (key === "e") openChoice("e");
    else if (key === "r") openChoice("r");
    else if (key === "c") click('button[data-key="c"]');
    else if (key === "j") follow("next");
    else if (key === "k") follow("prev");
    else return false;
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var typing = target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
    if (typing) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (document.querySelector("dialog[open]")) return;  // a confirmation has the keys
    // Enter on a focused link or button is that control's, not the selected row's.
    if (event.key === "Enter" && target && target.closest && target.closest("a, button, [role=button], summary")) return;
    var handled = false;
    if (document.querySelector("[data-inbox]")) handled = onInbox(event.key);
    else if (document.querySelector("[data-decision]")) handled = onDecision(event.key);
    if (handled) event.preventDefault();
  });

  // An Undo button counts down its window, then says the decision took effect.
  function armUndo() {
    document.querySelectorAll("form.undo[data-undo-left]:not([data-armed])").forEach(function (form) {
      form.dataset.armed = "1";
      var ends = Date.now() + parseFloat(form.dataset.undoLeft) * 1000;
      var timer = setInterval(function () {
        var left = Math.max(0, Math.round((ends - Date.now()) / 1000));
        var count = form.querySelector("[data-undo-count]");
        if (count) count.textContent = left;
        if (left <= 0) { clearInterval(timer); form.replaceWith("It has taken effect."); }
      }, 250);
    });
  }
  // Panels arrive by swap and by push (out of band): look for new ones now and then.
  document.addEventListener("DOMContentLoaded", function () {
    if (document.querySelector("[data-decision]")) { armUndo(); setInterval(armUndo, 300); }
  });

  // A live update replaces the list: keep the selection on the same item when it is still there.
  // A row whose approval is under way keeps it until the answer says where it goes.
  document.addEventListener("htmx:oobAfterSwap", function () {
    if (!selectedId) return;
    var row = document.getElementById(selectedId);
    if (row || !approving || approving.id !== selectedId) select(row);
  });

  // Filters apply as soon as they change (the form still has a button without JavaScript). Arrow
  // keys change a closed select one option at a time: from the keyboard the choice applies on
  // Enter or on leaving the field, not at the first option passed on the way (WCAG 3.2.2).
  var arrowed = null;
  document.addEventListener("keydown", function (event) {
    var form = event.target.closest && event.target.closest("form[data-autosubmit]");
    if (!form) return;
    if (/^(Arrow|Page|Home|End)/.test(event.key) || event.key.length === 1) arrowed = event.target;
    else if (event.key === "Enter" && event.target.dataset.changed) { event.preventDefault(); form.submit(); }
  }, true);
  document.addEventListener("change", function (event) {
    var field = event.target;
    var form = field.closest && field.closest("form[data-autosubmit]");
    if (!form) return;
    if (field !== arrowed) { form.submit(); return; }
    if (field.dataset.changed) return;
    field.dataset.changed = "1";
    field.addEventListener("blur", function () { form.submit(); }, { once: true });
  });
  document.addEventListener("mousedown", function () { arrowed = null; }, true);
})();
