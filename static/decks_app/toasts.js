// Toasts (decks_app/web/templates/web/toasts.html): each leaves after a few seconds, sooner
// with its × button, and stays while the pointer or the keyboard focus is on it.
(function () {
  var STAY_MS = 5000;
  var UNREACHABLE = "The server could not be reached; nothing was sent. Try again when it is back.";
  function leave(toast) {
    if (!toast.isConnected) return;
    toast.classList.add("leaving");
    setTimeout(function () { toast.remove(); }, 300);
  }
  function arm(toast) {
    if (toast.dataset.armed) return;
    toast.dataset.armed = "1";
    var timer = setTimeout(function () { leave(toast); }, STAY_MS);
    function hold() { clearTimeout(timer); }
    function release() { timer = setTimeout(function () { leave(toast); }, STAY_MS); }
    toast.addEventListener("mouseenter", hold);
    toast.addEventListener("focusin", hold);
    toast.addEventListener("mouseleave", release);
    toast.addEventListener("focusout", release);
    var close = toast.querySelector(".toast-close");
    if (close) close.addEventListener("click", function () { leave(toast); });
  }
  function armAll() {
    document.querySelectorAll("#toasts [data-toast]").forEach(arm);
  }
  // A refused htmx request (4xx/5xx) swaps nothing (base.html's responseHandling), so its
  // one sentence (web/error.html#error, or a twin's {"error"}) becomes an error toast: a
  // refused action is never silent, and what was typed stays where it was.
  function say(text) {
    var box = document.getElementById("toasts");
    if (!box) return;
    var toast = document.createElement("div");
    toast.className = "toast error";
    toast.setAttribute("data-toast", "");
    toast.setAttribute("role", "alert");
    var span = document.createElement("span");
    span.className = "toast-text";
    span.textContent = text;  // text, never markup
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    toast.append(span, close);
    box.appendChild(toast);
    arm(toast);
  }
  function refusal(xhr) {
    var body = xhr.responseText || "";
    try {
      var data = JSON.parse(body);
      if (data && typeof data.error === "string") return data.error;
    } catch (e) { /* not JSON: the error partial */ }
    var alert = new DOMParser().parseFromString(body, "text/html").querySelector('[role="alert"]');
    var text = alert ? alert.textContent.trim() : "";
    return text || "The server refused that (HTTP " + xhr.status + ").";
  }
  document.addEventListener("htmx:responseError", function (evt) { say(refusal(evt.detail.xhr)); });
  // A refusal htmx does not report as an error (a 409, swapped like a 200), told by the page
  // that sent it (session.js).
  document.addEventListener("gambit:refused", function (evt) {
    var xhr = evt.detail.xhr;
    say(xhr.status ? refusal(xhr) : UNREACHABLE);
  });
  document.addEventListener("htmx:sendError", function () { say(UNREACHABLE); });
  document.addEventListener("DOMContentLoaded", armAll);
  document.addEventListener("htmx:oobAfterSwap", armAll);
  document.addEventListener("htmx:afterSettle", armAll);
  armAll();
})();
