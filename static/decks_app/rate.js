// The rating queue, keyboard first (docs/calibration.md, "The rating queue"): 1..7 rate -3..+3,
// r writes a reason (Enter saves it, Esc leaves the field), n / → next, p / ← previous,
// s skip. The rater's name is kept in a cookie (the server reads it) and in localStorage (it
// restores the cookie if the cookie is cleared). Never acts while typing in another field.
(function () {
  var COOKIE = "gambit_rater";
  var nameField = document.getElementById("rater-name");
  var form = document.getElementById("rater-form");

  function setCookie(name) {
    document.cookie = COOKIE + "=" + encodeURIComponent(name) + "; path=/; max-age=31536000; SameSite=Lax";
  }
  function cookieName() {
    var match = document.cookie.match(/(?:^|;\s*)gambit_rater=([^;]*)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  var stored = "";
  try { stored = window.localStorage.getItem(COOKIE) || ""; } catch (e) { stored = ""; }
  if (!cookieName() && stored) {
    setCookie(stored);
    // Reload once to be served as that rater (not again if cookies are refused).
    if (cookieName()) { window.location.reload(); return; }
  }
  if (form && nameField) {
    form.addEventListener("submit", function (evt) {
      var name = nameField.value.trim();
      if (!name) return;
      evt.preventDefault();
      setCookie(name);
      try { window.localStorage.setItem(COOKIE, name); } catch (e) { /* private mode */ }
      window.location.href = form.getAttribute("action");
    });
  }

  var source = document.getElementById("rate-queue");
  var queue = source ? JSON.parse(source.textContent) : [];
  var base = form ? form.getAttribute("action") : "/grade/rate";

  function current() { return document.getElementById("rate-item"); }
  function position() {
    var item = current();
    if (!item) return -1;
    for (var i = 0; i < queue.length; i++) if (queue[i].target === item.dataset.target) return i;
    return -1;
  }
  var at = position();

  function show(i) {
    if (i < 0) return;
    if (i >= queue.length) { window.location.href = base; return; }  // a fresh queue
    at = i;
    var entry = queue[i];
    window.htmx.ajax("GET", entry.url, { target: "#rate-item", swap: "outerHTML" }).then(function () {
      var ref = entry.messageRefId || "conversation";
      window.history.replaceState(null, "", base + "?item=" + encodeURIComponent(entry.session + "/" + ref));
      var item = current();
      if (item) item.focus({ preventScroll: false });
    });
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function submitWith(score) {
    // A click, not requestSubmit: htmx takes the score from the button that was clicked.
    var button = document.querySelector("#rate-form button[name=score][value='" + score + "']");
    if (!button) return;
    // An item swapped in a moment ago is processed by htmx only when it settles; a key
    // pressed before that would post the form natively and leave the page. Process it now
    // (htmx skips an element it has already processed).
    if (window.htmx) window.htmx.process(button.form);
    button.click();
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var target = evt.target;
    if (target && target.id === "rate-reason") {
      if (evt.key === "Escape") { evt.preventDefault(); target.blur(); if (current()) current().focus(); }
      else if (evt.key === "Enter" && !evt.shiftKey) {
        evt.preventDefault();
        var rateForm = document.getElementById("rate-form");
        var score = rateForm && rateForm.dataset.score;
        if (score !== undefined && score !== "") submitWith(score);
        else {
          target.blur();
          if (current()) current().focus();  // then a score key saves both
          hint("Now give a score (1 … 7): it saves the reason with it.");
        }
      }
      return;
    }
    if (typing(target) || !current()) return;
    if (/^[1-7]$/.test(evt.key)) {
      evt.preventDefault();
      var button = document.querySelector("#rate-form button[data-key='" + evt.key + "']");
      if (button) submitWith(button.value);
    } else if (evt.key === "r") {
      evt.preventDefault();
      var reason = document.getElementById("rate-reason");
      if (reason) reason.focus();
    } else if (evt.key === "n" || evt.key === "ArrowRight" || evt.key === "s") {
      evt.preventDefault();
      show((at < 0 ? 0 : at + 1));
    } else if (evt.key === "p" || evt.key === "ArrowLeft") {
      evt.preventDefault();
      if (at > 0) show(at - 1);
    }
  });

  function hint(text) {
    var box = document.getElementById("rate-hint");
    if (box) box.textContent = text;
  }

  // A reason typed and not saved yet stays with its item: moving to another item and back
  // brings it back (never lost to a key pressed too early).
  var drafts = {};
  document.addEventListener("input", function (evt) {
    var item = current();
    if (evt.target && evt.target.id === "rate-reason" && item) drafts[item.dataset.target] = evt.target.value;
  });
  function restoreDraft() {
    var item = current();
    var reason = document.getElementById("rate-reason");
    var draft = item && drafts[item.dataset.target];
    if (reason && draft && !reason.value) {
      reason.value = draft;
      hint("Your unsaved reason is back; give a score (1 … 7) to save it.");
    }
  }

  // After a rating is saved the item comes back with the graders' reasons: keep the focus on
  // it so the next key works at once.
  document.body.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.detail && evt.detail.target && evt.detail.target.id === "rate-item") {
      var item = current();
      if (item && item.dataset.rated === "true") delete drafts[item.dataset.target];  // saved
      else restoreDraft();
      if (item && document.activeElement === document.body) item.focus();
    }
  });
})();
