// The Build tab's editor: CodeMirror (vendored), Ctrl/Cmd+S to save, the loader's problems
// shown inline at their line and refreshed as you type (debounced). No inline script.
(function () {
  const form = document.getElementById("editor-form");
  const textarea = document.getElementById("editor-text");
  if (!form || !textarea || typeof CodeMirror === "undefined") return;
  const path = form.dataset.path;
  const deck = form.dataset.deck;
  const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;
  const status = document.getElementById("save-status");
  const version = document.getElementById("editor-version");
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
  const editor = CodeMirror.fromTextArea(textarea, {
    mode, lineNumbers: true, lineWrapping: true, gutters: ["problems", "CodeMirror-linenumbers"],
    extraKeys: { "Ctrl-S": save, "Cmd-S": save },
  });
  window.gambitEditor = editor; // for tests and the console
  editor.getInputField().setAttribute("aria-label", "Contents of " + path);
  editor.getScrollerElement().setAttribute("tabindex", "0");
  const marks = [];

  function showProblems(problems) {
    marks.splice(0).forEach((m) => m.clear());
    editor.clearGutter("problems");
    const panel = document.getElementById("problems");
    const mine = problems.filter((p) => p.file === path && p.line);
    for (const p of mine) {
      const line = p.line - 1;
      const marker = document.createElement("span");
      marker.className = "problem-marker " + p.severity;
      marker.title = p.text;
      marker.textContent = p.severity === "error" ? "●" : "▲";
      editor.setGutterMarker(line, "problems", marker);
      marks.push(editor.addLineClass(line, "background", "problem-line-" + p.severity) && {
        clear: () => editor.removeLineClass(line, "background", "problem-line-" + p.severity),
      });
    }
    panel.replaceChildren();
    if (!problems.length) {
      const ok = document.createElement("p");
      ok.className = "meta ok-deck";
      ok.textContent = "The deck loads cleanly.";
      panel.append(ok);
      return;
    }
    const title = document.createElement("h2");
    title.textContent = "Problems";
    const list = document.createElement("ul");
    list.className = "problems";
    for (const p of problems) {
      const item = document.createElement("li");
      item.className = p.severity;
      item.dataset.file = p.file || "";
      item.dataset.line = p.line || "";
      item.textContent = p.text; // textContent: model and user text never become markup
      list.append(item);
    }
    panel.append(title, list);
  }

  async function post(url, fields) {
    const body = new URLSearchParams(fields);
    const response = await fetch(url, {
      method: "POST", body, headers: { "X-CSRFToken": csrf, Accept: "application/json" },
    });
    return [response.status, await response.json()];
  }

  async function save() {
    status.textContent = "Saving…";
    const [code, data] = await post("/build/save", {
      path, deck, text: editor.getValue(), version: version.value,
    });
    if (code === 409) {
      document.getElementById("conflict").hidden = false;
      document.getElementById("conflict-disk").textContent = data.conflict.diskText;
      version.value = data.conflict.diskVersion;
      status.textContent = "Not saved: the file changed on disk.";
      return;
    }
    if (code !== 200) { status.textContent = "Not saved: " + (data.error || code); return; }
    version.value = data.version;
    saved = editor.getValue();
    form.dataset.dirty = "false";
    document.getElementById("conflict").hidden = true;
    const errors = data.problems.filter((p) => p.severity === "error").length;
    status.textContent = errors ? `Saved, with ${errors} error(s) in the deck.` : "Saved.";
    showProblems(data.problems);
  }

  let timer = null;
  editor.on("change", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!deck) return;
      const [code, data] = await post("/build/validate", { path, deck, text: editor.getValue() });
      if (code === 200) showProblems(data.problems);
    }, 500);
  });
  form.addEventListener("submit", (event) => { event.preventDefault(); save(); });

  // Changes on disk: reload the file when nothing was typed since it was loaded or saved.
  let saved = editor.getValue();
  editor.on("change", () => { form.dataset.dirty = String(editor.getValue() !== saved); });
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/build/`);
    socket.onmessage = async (event) => {
      const changed = JSON.parse(event.data).changed || [];
      if (!changed.includes(path)) {
        if (changed.length && deck) {
          const [code, data] = await post("/build/validate", { path, deck, text: editor.getValue() });
          if (code === 200) showProblems(data.problems);
        }
        return;
      }
      const response = await fetch(`/build/file.json?path=${encodeURIComponent(path)}&deck=${encodeURIComponent(deck)}`);
      if (!response.ok) return;
      const data = await response.json();
      if (data.version === version.value) return; // our own save
      if (form.dataset.dirty === "true") {
        status.textContent = "This file changed on disk; saving will show both versions.";
        return;
      }
      saved = data.text;
      editor.setValue(data.text);
      version.value = data.version;
      form.dataset.dirty = "false";
      status.textContent = "Reloaded: the file changed on disk.";
      showProblems(data.problems);
    };
    socket.onclose = () => setTimeout(connect, 1000);
  }
  connect();
})();
