// The session page's behaviour htmx has no attribute for (the socket's hello is live.js):
// announcing a finished reply, keeping the newest text in view, the run timer, Enter to send, and
// what was typed kept in the box until the server has taken it.
(function () {
  var lastStatus = (document.getElementById("status") || {}).textContent;
  document.body.addEventListener("htmx:wsAfterMessage", function () {
    // A finished reply is announced once (not per delta), and focus goes back to the message
    // box when a swap left it nowhere.
    var statusEl = document.getElementById("status");
    var status = statusEl ? statusEl.textContent.trim() : null;
    if (status && status !== lastStatus) {
      lastStatus = status;
      if (status !== "queued" && status !== "running") {
        var busy = document.getElementById("busy-send");
        if (busy) busy.hidden = true;  // the waiting message can be sent now
        var replies = document.querySelectorAll("#conversation .bubble.assistant .text");
        var announce = document.getElementById("announce");
        var last = replies.length ? replies[replies.length - 1].textContent.trim() : "";
        if (announce) announce.textContent = status === "completed" ? "Reply: " + last : "Run " + status;
        var box = document.getElementById("message");
        if (box && (document.activeElement === document.body || !document.activeElement)) box.focus();
      }
    }
    // Keep the newest text in view while it streams.
    var live = document.getElementById("live");
    if (live && live.lastElementChild) live.lastElementChild.scrollIntoView({block: "nearest"});
    // Keep only the newest rows of the raw event list (the trace page has them all).
    var raw = document.getElementById("raw-events");
    if (raw) {
      var limit = parseInt(raw.dataset.limit || "500", 10);
      while (raw.children.length > limit) raw.removeChild(raw.firstElementChild);
    }
  });
  // The "thinking / responding" timer of a live run: the server says how long the run had
  // been going when it rendered the indicator; the browser counts on from there. It says
  // "responding" once reply text is streaming.
  setInterval(function () {
    var el = document.getElementById("activity");
    if (!el) return;
    if (!el.dataset.t0) el.dataset.t0 = String(performance.now());
    var elapsed = parseFloat(el.dataset.elapsed || "0") + (performance.now() - parseFloat(el.dataset.t0)) / 1000;
    var streaming = document.querySelector("#live .bubble.assistant");
    var phase = streaming ? "responding" : (el.dataset.phase === "responding" ? "responding" : "thinking");
    el.querySelector(".phase").textContent = phase;
    el.querySelector(".elapsed").textContent = elapsed.toFixed(1);
  }, 200);
  // Enter sends; Shift+Enter makes a new line. An empty message is refused on the spot.
  document.body.addEventListener("keydown", function (evt) {
    var box = evt.target;
    if (evt.key !== "Enter" || evt.shiftKey || evt.isComposing) return;
    if (!box.matches || !box.matches("#composer textarea[name=message]")) return;
    evt.preventDefault();
    var note = document.getElementById("empty-send");
    if (!box.value.trim()) {
      if (note) note.hidden = false;
      return;
    }
    if (note) note.hidden = true;
    var send = document.getElementById("send");
    if (send && send.disabled) {  // a run is going: the message waits in the box
      var busy = document.getElementById("busy-send");
      if (busy) busy.hidden = false;
      return;
    }
    box.form.requestSubmit();
  });
  // What was typed leaves the box only once the server has taken it: a refused send (the
  // session busy, say) keeps it, and so does text typed while a send was on its way. The
  // outcome is read from the request itself, not from htmx's events on the form: a live
  // update may replace the form while the send is on its way, and htmx's events on a form no
  // longer in the page reach no listener. The app swaps a 409 like a 200 (the Build editor's
  // conflict page), so a send refused because a run is going is told here (toasts.js shows
  // it), as is a refusal htmx's own error event could not deliver.
  document.body.addEventListener("htmx:beforeRequest", function (evt) {
    var form = evt.detail.elt;
    var xhr = evt.detail.xhr;
    var box = document.getElementById("message");
    if (!box || !xhr || !form || form.id !== "composer") return;
    var sent = box.value;
    xhr.addEventListener("loadend", function () {
      var taken = xhr.status >= 200 && xhr.status < 300;
      if (!taken && (xhr.status === 409 || !form.isConnected)) {
        document.dispatchEvent(new CustomEvent("gambit:refused", { detail: { xhr: xhr } }));
      }
      var current = document.getElementById("message");
      if (current && taken && current.value === sent) current.value = "";
    });
  });
})();
