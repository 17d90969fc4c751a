// Taproot dashboard: the few behaviours htmx does not cover. Loaded as a file (the
// Content-Security-Policy forbids inline script); every feature degrades to plain links.
(function () {
  "use strict";

  document.documentElement.classList.add("js");

  const narrow = window.matchMedia("(max-width: 60rem)");
  const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");
  const COLLAPSED_KEY = "taproot.previewCollapsed";

  function byId(id) {
    return document.getElementById(id);
  }

  function announce(message) {
    const status = byId("dash-status");
    if (status) {
      status.textContent = message;
    }
  }

  // --- The Reflect Preview panel -------------------------------------------------
  // Beside the list it can be collapsed (remembered); on a narrow window it opens
  // full-screen over the list and closes again with its button or Escape.

  function previewIsOpen() {
    const body = document.body;
    return narrow.matches
      ? body.classList.contains("preview-open")
      : !body.classList.contains("preview-collapsed");
  }

  function showPanelState() {
    const toggle = byId("preview-toggle");
    const close = byId("preview-close");
    if (!toggle || !byId("preview-panel")) {
      return;
    }
    const open = previewIsOpen();
    toggle.hidden = false;
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Hide reflect preview" : "Show reflect preview";
    if (close) {
      close.hidden = !narrow.matches;
    }
  }

  function setPreviewOpen(open) {
    const body = document.body;
    if (narrow.matches) {
      body.classList.toggle("preview-open", open);
      const target = open ? byId("preview-heading") : byId("preview-toggle");
      if (target) {
        if (open) {
          target.setAttribute("tabindex", "-1");
        }
        target.focus();
      }
    } else {
      body.classList.toggle("preview-collapsed", !open);
      try {
        window.localStorage.setItem(COLLAPSED_KEY, open ? "0" : "1");
      } catch (error) {
        // Storage may be unavailable (private mode); the state then lasts for this page.
      }
    }
    showPanelState();
  }

  function restorePanelState() {
    try {
      if (window.localStorage.getItem(COLLAPSED_KEY) === "1") {
        document.body.classList.add("preview-collapsed");
      }
    } catch (error) {
      // As above: no remembered state.
    }
    showPanelState();
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest("#preview-toggle")) {
      setPreviewOpen(!previewIsOpen());
    } else if (event.target.closest("#preview-close")) {
      setPreviewOpen(false);
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && narrow.matches && previewIsOpen()) {
      setPreviewOpen(false);
    }
  });

  narrow.addEventListener("change", showPanelState);

  // --- From a preview block to its card ------------------------------------------

  function showHiddenNotice(link) {
    const status = byId("preview-status");
    if (!status) {
      return;
    }
    const open = document.createElement("a");
    open.href = link.href;
    open.textContent = "Open it on its own page";
    status.replaceChildren(
      document.createTextNode(
        "That memory is not in the list as it is filtered now (the filters or another page hide it). "
      ),
      open,
      document.createTextNode(".")
    );
  }

  let highlightedId = "";

  function highlightCard(card) {
    highlightedId = card.id;
    document.querySelectorAll(".memory-card.is-highlighted").forEach(function (other) {
      other.classList.remove("is-highlighted");
    });
    card.classList.add("is-highlighted");
    card.scrollIntoView({
      behavior: reducedMotion.matches ? "auto" : "smooth",
      block: "center",
    });
    card.focus({ preventScroll: true });
  }

  document.addEventListener("click", function (event) {
    const link = event.target.closest("#preview-panel a[data-memory-id]");
    if (!link || !byId("memory-list")) {
      return; // no list on this page: the link opens the memory itself
    }
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    const card = byId("memory-" + link.dataset.memoryId);
    if (!card) {
      showHiddenNotice(link);
      return;
    }
    const status = byId("preview-status");
    if (status) {
      status.textContent = "";
    }
    if (narrow.matches) {
      setPreviewOpen(false);
    }
    highlightCard(card);
  });

  // --- Keep what the person opened when htmx swaps a region --------------------
  // An out-of-band swap replaces the preview; keep its <details id=…> (the raw view)
  // as open as they were.

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    const detail = event.detail;
    detail.target.querySelectorAll("details[id][open]").forEach(function (open) {
      const replacement = detail.fragment.querySelector("#" + CSS.escape(open.id));
      if (replacement) {
        replacement.setAttribute("open", "");
      }
    });
  });

  // A card swapped after an edit keeps its highlight.
  document.addEventListener("htmx:afterSwap", function () {
    const card = highlightedId && byId(highlightedId);
    if (card) {
      card.classList.add("is-highlighted");
    }
  });

  // --- A suggestion applied: its memory's card (when listed) is read again ----------

  document.addEventListener("taproot:memory-changed", function (event) {
    const card = byId("memory-" + event.detail.id);
    if (card && card.dataset.cardUrl) {
      htmx.ajax("GET", card.dataset.cardUrl, { target: card, swap: "outerHTML" });
    }
  });

  // --- Short, shareable filter URLs --------------------------------------------
  // Leave empty filter fields out of the query string the list pushes to the URL.

  document.addEventListener("htmx:configRequest", function (event) {
    if (!event.detail.elt || event.detail.elt.id !== "filters") {
      return;
    }
    const data = event.detail.formData;
    Array.from(new Set(data.keys())).forEach(function (name) {
      if (data.getAll(name).every(function (value) { return value === ""; })) {
        data.delete(name);
      }
    });
  });

  // --- Failures htmx leaves unswapped (a vanished memory, a server or network error) --

  document.addEventListener("htmx:responseError", function (event) {
    const status = event.detail.xhr.status;
    if (status === 404) {
      announce("That memory no longer exists. Reload the page to see the store as it is now.");
    } else if (status === 403) {
      announce("Your session has ended or the form expired. Reload the page and log in again.");
    } else {
      announce("The server could not do that (error " + status + "). Reload the page to see what was saved.");
    }
  });

  document.addEventListener("htmx:sendError", function () {
    announce("The server could not be reached; nothing was changed. Check the connection and try again.");
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) {
      const status = byId("dash-status");
      if (status && status.textContent) {
        status.textContent = "";
      }
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", restorePanelState);
  } else {
    restorePanelState();
  }
})();
