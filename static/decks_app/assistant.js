// The Build assistant's chat: send a message, follow the run, show each change as a diff
// with Undo. Everything the model wrote is inserted as text, never as markup.
(function () {
  const panel = document.getElementById("assistant");
  if (!panel) return;
  const deck = panel.dataset.deck;
  const form = document.getElementById("assistant-form");
  const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;
  const status = document.getElementById("assistant-status");
  let polling = null;

  function render(data) {
    const list = document.getElementById("assistant-conversation");
    list.replaceChildren(...data.conversation.map((m) => {
      const item = document.createElement("li");
      item.className = "assistant-" + m.kind;
      item.textContent = (m.kind === "user" ? "You: " : "Assistant: ") + m.text;
      return item;
    }));
    const changes = document.getElementById("assistant-changes");
    changes.replaceChildren();
    for (const run of data.runs) {
      for (const change of run.changes) {
        const box = document.createElement("div");
        box.className = "assistant-change";
        const title = document.createElement("h3");
        title.textContent = (run.undone ? "Undone: " : "Changed: ") + change.path;
        const pre = document.createElement("pre");
        pre.className = "diff";
        pre.textContent = change.diff;
        box.append(title, pre);
        if (!run.undone) {
          const undo = document.createElement("button");
          undo.type = "button";
          undo.textContent = "Undo this change";
          undo.dataset.run = run.id;
          undo.addEventListener("click", async () => {
            const body = new URLSearchParams({ run: run.id });
            const response = await fetch("/build/assistant/undo", {
              method: "POST", body, headers: { "X-CSRFToken": csrf, Accept: "application/json" },
            });
            const result = await response.json();
            status.textContent = response.ok ? "Undone." : result.error;
            refresh();
          });
          box.append(undo);
        }
        changes.append(box);
      }
    }
    const last = data.runs[data.runs.length - 1];
    const busy = last && (last.status === "queued" || last.status === "running");
    status.textContent = busy ? "The assistant is working…" : last && last.error ? "Failed: " + last.error : "";
    if (busy && !polling) polling = setInterval(refresh, 700);
    if (!busy && polling) { clearInterval(polling); polling = null; }
  }

  async function refresh() {
    const response = await fetch(`/build/assistant.json?deck=${encodeURIComponent(deck)}`);
    if (response.ok) render(await response.json());
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = new URLSearchParams(new FormData(form));
    body.set("deck", deck);
    const response = await fetch("/build/assistant/send", {
      method: "POST", body, headers: { "X-CSRFToken": csrf, Accept: "application/json" },
    });
    const data = await response.json();
    if (!response.ok) { status.textContent = data.error; return; }
    document.getElementById("assistant-message").value = "";
    render(data);
  });
  refresh();
})();
