// The entry page of a draw sale: enter once, then poll the entry until
// the draw has decided it. Plain browser JavaScript, no build step.
(function () {
  "use strict";
  const page = document.getElementById("draw");
  const sale = page.dataset.sale;
  const $ = (id) => document.getElementById(id);
  // With identity on, pass the buyer's access token as #token=... in the
  // page address; it is sent as Authorization: Bearer.
  const accessToken = new URLSearchParams(location.hash.slice(1)).get("token");
  let userId = "";

  const said = {
    entered: "You are in the draw. Results come when entries close.",
    won: "You won: your order is below. Pay for it before its hold runs out.",
    waitlisted: "Not this time yet: you are on the waiting list, in the draw's order.",
    lost: "Not this time: the draw did not reach you.",
  };

  function headers() {
    const h = { "Content-Type": "application/json" };
    if (accessToken) h["Authorization"] = "Bearer " + accessToken;
    return h;
  }

  async function call(method, path, body) {
    const response = await fetch(path, {
      method: method,
      headers: headers(),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    return { status: response.status, data: data };
  }

  function fail(answer) {
    const e = answer.data && answer.data.error;
    const error = $("error");
    error.textContent = e ? e.message : "unexpected answer " + answer.status;
    error.dataset.code = e ? e.code : "";
    error.hidden = false;
  }

  function show(entry) {
    $("enter-form").hidden = true;
    $("entry").hidden = false;
    $("error").hidden = true;
    $("status").textContent = said[entry.result] || entry.result;
    $("entry").dataset.result = entry.result;
    $("entry-id").textContent = entry.entry_id;
    $("position").textContent = entry.position === undefined ? "–" : String(entry.position + 1);
    $("order").textContent = entry.order_id || "–";
    if (entry.result !== "entered") {
      $("proof-link").href = "/v1/sales/" + sale + "/draw";
      $("proof").hidden = false;
    }
  }

  async function poll() {
    const who = accessToken ? "" : "?user_id=" + encodeURIComponent(userId);
    const answer = await call("GET", "/v1/sales/" + sale + "/entries/me" + who);
    if (answer.status === 200) {
      show(answer.data);
      // Until the draw settles, a hold may still roll down to this entry.
      if (answer.data.result === "entered" || answer.data.result === "waitlisted") {
        setTimeout(poll, 1000);
      }
    } else {
      fail(answer);
    }
  }

  $("enter-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    userId = $("user-id").value.trim();
    const body = {};
    if (!accessToken) body.user_id = userId;
    const sku = $("sku").value.trim();
    if (sku) body.sku = sku;
    $("enter").disabled = true;
    const answer = await call("POST", "/v1/sales/" + sale + "/entries", body);
    $("enter").disabled = false;
    if (answer.status === 200 || answer.status === 201) {
      show(answer.data);
      setTimeout(poll, 1000);
    } else {
      fail(answer);
    }
  });
})();
