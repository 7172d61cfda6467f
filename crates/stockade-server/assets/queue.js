// The waiting page: join, poll with backoff, buy once admitted.
// Plain browser JavaScript, no framework, no build step.
(function () {
  "use strict";
  const room = document.getElementById("room");
  const sale = room.dataset.sale;
  const $ = (id) => document.getElementById(id);
  // With identity on, pass the buyer's access token as #token=... in the
  // page address; it is sent as Authorization: Bearer.
  const accessToken = new URLSearchParams(location.hash.slice(1)).get("token");
  const idempotencyKey = "page-" + Math.random().toString(36).slice(2) + Date.now().toString(36);
  let userId = "";
  let ticket = null;
  let admission = null;
  let delay = 1000;

  function headers(extra) {
    const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
    if (accessToken) h["Authorization"] = "Bearer " + accessToken;
    return h;
  }

  function show(id, text) {
    const el = $(id);
    el.textContent = text;
    el.hidden = false;
  }

  const closing = {
    order: "Done: your purchase went through.",
    sold_out: "There is nothing left to buy.",
    ended: "The sale is over.",
  };

  function finish(outcome, text) {
    $("buy").hidden = true;
    $("position").textContent = "–";
    $("wait").textContent = "–";
    $("status").textContent = closing[outcome] || "";
    const result = $("result");
    result.dataset.outcome = outcome;
    show("result", text);
  }

  async function call(method, path, body, extra) {
    const response = await fetch(path, {
      method: method,
      headers: headers(extra),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    return { status: response.status, data: data, retryAfter: Number(response.headers.get("Retry-After")) || 0 };
  }

  function errorText(answer) {
    const e = answer.data && answer.data.error;
    return e ? e.message : "unexpected answer " + answer.status;
  }

  function render(t) {
    $("ticket").hidden = false;
    if (t.status === "waiting") {
      $("status").textContent = "You are in the queue.";
      $("position").textContent = String(t.position);
      $("wait").textContent = t.estimated_wait_seconds < 1 ? "less than a second" :
        "about " + t.estimated_wait_seconds + " s";
    } else if (t.status === "admitted") {
      $("position").textContent = "–";
      $("wait").textContent = "–";
      $("status").textContent = "It is your turn: buy before " +
        new Date(t.admission_expires_at).toLocaleTimeString() + ".";
      if (admission !== t.admission_token) {
        admission = t.admission_token;
        const buy = $("buy");
        buy.hidden = false;
        buy.disabled = false;
        buy.focus();
      }
    } else {
      $("position").textContent = "–";
      $("wait").textContent = "–";
      if (t.closed_reason === "admission_expired") {
        $("status").textContent = "Your turn expired. Join again to queue once more.";
        $("join-form").hidden = false;
        ticket = null;
      } else if (t.closed_reason === "ended") {
        finish("ended", "The sale has ended.");
      } else {
        finish("sold_out", "Sold out.");
      }
    }
  }

  function schedule(t) {
    if (!ticket || (t && t.status !== "waiting")) return;
    // Poll sooner when the turn is near, back off while far or failing.
    const near = t && t.estimated_wait_seconds !== undefined ? t.estimated_wait_seconds * 500 : delay;
    const wait = Math.max(500, Math.min(delay, near, 8000));
    delay = Math.min(delay * 1.5, 8000);
    setTimeout(poll, wait);
  }

  // The error code of an answer, if it has one.
  function errorCode(answer) {
    return answer.data && answer.data.error && answer.data.error.code;
  }

  async function poll() {
    if (!ticket) return;
    try {
      const answer = await call("GET", "/v1/queue/" + encodeURIComponent(ticket));
      if (answer.status === 200) {
        $("error").hidden = true;
        render(answer.data);
        schedule(answer.data);
      } else if (answer.status === 404) {
        ticket = null;
        show("error", errorText(answer));
        $("join-form").hidden = false;
      } else {
        delay = Math.max(delay * 2, answer.retryAfter * 1000);
        show("error", errorText(answer) + " Retrying…");
        schedule(null);
      }
    } catch (_) {
      delay = Math.min(delay * 2, 8000);
      show("error", "The connection failed. Retrying…");
      schedule(null);
    }
  }

  $("join-form").addEventListener("submit", async function (event) {
    event.preventDefault();
    userId = $("user-id").value.trim();
    if (!userId) {
      show("error", "Enter your user id to join the queue.");
      $("user-id").focus();
      return;
    }
    $("join").disabled = true;
    try {
      const answer = await call("POST", "/v1/sales/" + sale + "/queue", { user_id: userId });
      if (answer.status === 200 || answer.status === 201) {
        $("error").hidden = true;
        $("join-form").hidden = true;
        ticket = answer.data.ticket;
        delay = 1000;
        render(answer.data);
        schedule(answer.data);
      } else if (answer.status === 409 && errorCode(answer) !== "no_waiting_room") {
        $("join-form").hidden = true;
        const code = errorCode(answer);
        finish(code === "ended" ? "ended" : "sold_out", code === "ended" ? "The sale has ended." : "Sold out.");
      } else {
        show("error", errorText(answer));
      }
    } catch (_) {
      show("error", "The connection failed; try again.");
    } finally {
      $("join").disabled = false;
    }
  });

  $("buy").addEventListener("click", async function () {
    const buy = $("buy");
    buy.disabled = true;
    try {
      const answer = await call("POST", "/v1/sales/" + sale + "/purchases",
        { user_id: userId, quantity: 1 },
        { "Admission-Token": admission, "Idempotency-Key": idempotencyKey });
      if (answer.status === 201 || answer.status === 200 || answer.status === 202) {
        ticket = null;
        finish("order", "Your order: " + answer.data.order_id);
      } else if (answer.status === 409 && answer.data && answer.data.error.code === "sold_out") {
        ticket = null;
        finish("sold_out", "Sold out.");
      } else {
        show("error", errorText(answer));
        buy.disabled = false;
      }
    } catch (_) {
      show("error", "The connection failed; press Buy again (you will not be charged twice).");
      buy.disabled = false;
    }
  });
})();
