// Herald's status page: swap in a fresh copy of the page every few seconds, and keep
// a pasted token in a cookie (only when the broker runs with --auth-keys).
"use strict";
const REFRESH_MS = 5000;

async function refresh() {
  try {
    const response = await fetch(window.location.pathname, {cache: "no-store", credentials: "same-origin"});
    if (response.ok) {
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("status");
      if (fresh) document.getElementById("status").replaceWith(fresh);
    }
  } catch (err) {
    // The broker is restarting or unreachable: keep what is shown, try again later.
  }
  setTimeout(refresh, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("token-form");
  if (form) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const token = document.getElementById("token").value.trim();
      document.cookie = "herald_token=" + encodeURIComponent(token) + "; path=/; SameSite=Strict";
      window.location.reload();
    });
  } else if (document.getElementById("status")) {
    setTimeout(refresh, REFRESH_MS);
  }
});
