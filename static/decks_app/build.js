// The Build tab's editor: CodeMirror (vendored), Ctrl/Cmd+S to save, the loader's problems
// at their line, refreshed as you type (debounced). What htmx cannot do alone is here: the
// editor's text goes into the save and validate requests, and the problems panel and the
// disk's version (both rendered by the server, see build_file.html) are read back into the
// editor's gutter and text. No inline script, no markup built here.
(function () {
  const form = document.getElementById("editor-form");
  const textarea = document.getElementById("editor-text");
  if (!form || !textarea || typeof CodeMirror === "undefined") return;
  const path = form.dataset.path;
  const deck = form.dataset.deck;
  // Both are swapped out by the server's answers: always look them up.
  const status = () => document.getElementById("save-status");
  const version = () => document.getElementById("editor-version");
  // Markdown decks: TOML between the +++ lines of the front matter, Markdown after it.
  if (CodeMirror.multiplexingMode && !CodeMirror.modes["gambit-deck"]) {
    CodeMirror.defineMode("gambit-deck", function (config) {
      return CodeMirror.multiplexingMode(CodeMirror.getMode(config, "markdown"), {
        open: "+++", close: "+++", mode: CodeMirror.getMode(config, "toml"), delimStyle: "meta",
      });
    });
  }
  const mode = path.endsWith(".py") ? "python"
    : path.endsWith(".json") ? { name: "javascript", json: true }
    : path.endsWith(".ts") ? "javascript"
    : path.endsWith(".toml") ? "toml"
    : path.match(/\.ya?ml$/) ? "yaml"
    : path.endsWith(".md") && textarea.value.startsWith("+++") ? "gambit-deck" : "markdown";
  const save = () => htmx.trigger(form, "submit");
  const editor = CodeMirror.fromTextArea(textarea, {
    mode, lineNumbers: true, lineWrapping: true, gutters: ["problems", "CodeMirror-linenumbers"],
    extraKeys: { "Ctrl-S": save, "Cmd-S": save },
  });
  window.gambitEditor = editor; // for tests and the console
  editor.getInputField().setAttribute("aria-label", "Contents of " + path);
  editor.getScrollerElement().setAttribute("tabindex", "0");
  let saved = editor.getValue();
  const dirty = () => editor.getValue() !== saved;
  // Leaving with unsaved edits (a link, Back, closing the tab) asks first: they were lost
  // without a word. The browser words the question itself.
  window.addEventListener("beforeunload", (event) => {
    if (dirty()) event.preventDefault();
  });

  // The gutter follows the problems panel the server rendered (#problems li).
  const marks = [];
  function markProblems() {
    marks.splice(0).forEach((clear) => clear());
    editor.clearGutter("problems");
    document.querySelectorAll("#problems li[data-line]").forEach((item) => {
      if (item.dataset.file !== path || !item.dataset.line) return;
      const line = parseInt(item.dataset.line, 10) - 1;
      const severity = item.className;
      const marker = document.createElement("span");
      marker.className = "problem-marker " + severity;
      marker.title = item.textContent;
      marker.textContent = severity === "error" ? "●" : "▲";
      editor.setGutterMarker(line, "problems", marker);
      // Removed by its handle, not its number: lines typed above move the highlight down,
      // and a number would then clear the wrong line and leave this one highlighted.
      const handle = editor.addLineClass(line, "background", "problem-line-" + severity);
      marks.push(() => editor.removeLineClass(handle, "background", "problem-line-" + severity));
    });
  }

  // The editor's text rides along with the form's own fields.
  form.addEventListener("htmx:configRequest", (evt) => {
    evt.detail.parameters.text = editor.getValue();
  });
  form.addEventListener("htmx:beforeRequest", () => { status().textContent = "Saving…"; });
  form.addEventListener("htmx:afterRequest", (evt) => {
    if (evt.detail.xhr.status === 200) saved = editor.getValue();
  });
  function validate() {
    if (!deck) return;
    // Sent from the body (not the form), so the form's save handlers stay out of it.
    htmx.ajax("POST", form.dataset.validateUrl, {
      source: document.body, swap: "none", values: { path, deck, text: editor.getValue() },
    });
  }
  let timer = null;
  editor.on("change", () => { clearTimeout(timer); timer = setTimeout(validate, 500); });

  // A change on disk (#disk-file, sent by the Build socket): load it unless unsaved edits
  // would be lost; with unsaved edits, check the draft against the deck as it now is.
  let seen = document.getElementById("disk-file").dataset.version;
  function followDisk() {
    const disk = document.getElementById("disk-file");
    const text = disk && disk.querySelector("textarea");
    if (disk && text && disk.dataset.version !== seen) {
      seen = disk.dataset.version;
      if (seen !== version().value) {
        if (dirty()) {
          status().textContent = "This file changed on disk; saving will show both versions.";
        } else {
          editor.setValue(text.value);
          saved = text.value;
          version().value = seen;
          status().textContent = "Reloaded: the file changed on disk.";
        }
      }
    }
    if (dirty()) validate();
  }
  document.body.addEventListener("htmx:wsAfterMessage", () => { followDisk(); markProblems(); });
  document.body.addEventListener("htmx:oobAfterSwap", markProblems);
  markProblems();
})();
