// The replay page's keys (docs/simulator.md, "Replay"): ← → one event, Shift+← → or
// Page Up / Page Down one turn, Home and End the start and the end. Each key presses the
// button that does the same (htmx swaps the frame in), so keys and buttons never differ.
(function () {
  var KEYS = {
    ArrowLeft: "prev", ArrowRight: "next",
    PageUp: "prev-turn", PageDown: "next-turn",
    Home: "first", End: "last",
  };
  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.metaKey || evt.altKey || evt.isComposing) return;
    var target = evt.target;
    // the slider and text fields keep their own arrow keys
    if (target && target.closest && target.closest("input, textarea, select, [contenteditable]")) return;
    var id = KEYS[evt.key];
    if (!id) return;
    if (evt.shiftKey && (evt.key === "ArrowLeft" || evt.key === "ArrowRight")) {
      id = evt.key === "ArrowLeft" ? "prev-turn" : "next-turn";
    }
    var button = document.getElementById(id);
    if (!button) return;
    evt.preventDefault();
    if (button.disabled) return;
    // a key pressed right after a swap may come before htmx has set the new frame up
    if (window.htmx) htmx.process(button);
    button.click();
  });
})();
