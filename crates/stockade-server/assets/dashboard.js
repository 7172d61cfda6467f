// Stockade live dashboard: polls /dashboard/api/overview every second and
// redraws. Plain DOM, no framework; text goes in through textContent only.
"use strict";

const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function fact(list, name, value, field) {
  const row = el("div");
  row.append(el("dt", {}, name));
  const dd = el("dd", field ? { "data-field": field } : {}, String(value));
  row.append(dd);
  list.append(row);
}

function ms(latency, key) {
  if (!latency) return "–";
  const v = latency[key];
  return v < 10 ? v.toFixed(2) + " ms" : v.toFixed(0) + " ms";
}

function rate(v) {
  return v < 10 ? v.toFixed(1) : v.toFixed(0);
}

const LABELS = {
  not_started: "not started",
  selling: "selling",
  sold_out: "sold out",
  ended: "ended",
};

function chart(history, slotSeconds) {
  const width = 600, height = 90, n = Math.max(history.length, 60);
  const max = Math.max(1, ...history.map(s => s.purchased + s.rejected + s.failed));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  const total = history.reduce((a, s) => a + s.purchased, 0);
  const rejected = history.reduce((a, s) => a + s.rejected, 0);
  svg.setAttribute("aria-label",
    `Last ${Math.round(n * slotSeconds / 60)} minutes in ${slotSeconds}-second bars: ` +
    `${total} purchased, ${rejected} rejected`);
  const bar = width / n;
  const offset = n - history.length;
  history.forEach((slot, i) => {
    let y = height;
    for (const [key, color] of [["purchased", "#1d4ed8"], ["rejected", "#b45309"], ["failed", "#b91c1c"]]) {
      const h = (slot[key] / max) * (height - 4);
      if (h <= 0) continue;
      y -= h;
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", ((offset + i) * bar + 0.5).toFixed(1));
      rect.setAttribute("y", y.toFixed(1));
      rect.setAttribute("width", Math.max(bar - 1, 0.5).toFixed(1));
      rect.setAttribute("height", h.toFixed(1));
      rect.setAttribute("fill", color);
      svg.append(rect);
    }
  });
  return svg;
}

function saleCard(sale, slotSeconds) {
  const card = el("article", { class: "sale", id: "sale-" + sale.id, "aria-labelledby": "title-" + sale.id });
  const head = el("header");
  head.append(el("h3", { id: "title-" + sale.id }, "Sale " + sale.id));
  head.append(el("span", { class: "badge status-" + sale.status, "data-field": "status" }, LABELS[sale.status] || sale.status));
  head.append(el("span", { class: "badge engine-" + sale.engine_state, "data-field": "engine_state" }, "engine: " + sale.engine_state));
  card.append(head);

  const numbers = el("dl", { class: "numbers" });
  fact(numbers, "Stock", sale.stock, "stock");
  fact(numbers, "Sold", sale.sold, "sold");
  fact(numbers, "Remaining", sale.remaining, "remaining");
  fact(numbers, "Committed", sale.committed, "committed");
  fact(numbers, "Purchases/s", rate(sale.purchases_per_second), "purchases_per_second");
  fact(numbers, "Rejections/s", rate(sale.rejections_per_second), "rejections_per_second");
  fact(numbers, "p50 latency", ms(sale.latency, "p50_ms"), "p50");
  fact(numbers, "p99 latency", ms(sale.latency, "p99_ms"), "p99");
  // WAITING ROOM: shown only when the sale has one.
  if (sale.waiting_room !== null && sale.waiting_room !== undefined) {
    fact(numbers, "Waiting room", sale.waiting_room, "waiting_room");
  }
  card.append(numbers);
  // SKUS: a table of each one's stock when the sale has several.
  if (sale.skus.length > 1) {
    const table = el("table", { class: "skus", "data-field": "skus" });
    const head = el("tr");
    for (const name of ["SKU", "Stock", "Sold", "Remaining"]) head.append(el("th", { scope: "col" }, name));
    table.append(el("caption", {}, "Stock by SKU"), el("thead", {}, head));
    const body = el("tbody");
    for (const sku of sale.skus) {
      const row = el("tr", { "data-sku": sku.id });
      row.append(el("th", { scope: "row" }, sku.id));
      row.append(el("td", { "data-sku-field": "stock" }, String(sku.stock)));
      row.append(el("td", { "data-sku-field": "sold" }, String(sku.sold)));
      row.append(el("td", { "data-sku-field": "remaining" }, String(sku.remaining)));
      body.append(row);
    }
    table.append(body);
    card.append(table);
  }

  const reasons = Object.entries(sale.rejections);
  const text = reasons.length
    ? "Rejections: " + reasons.map(([k, v]) => `${k.replace(/_/g, " ")} ${v}`).join(", ")
    : "Rejections: none";
  card.append(el("p", { class: "reasons", "data-field": "rejections" }, text));
  card.append(chart(sale.history, slotSeconds));
  const legend = el("p", { class: "legend", "aria-hidden": "true" });
  legend.append(el("span", { class: "l-sold" }, "purchased"));
  legend.append(el("span", { class: "l-rejected" }, "rejected"));
  legend.append(el("span", { class: "l-failed" }, "errors"));
  card.append(legend);
  return card;
}

function render(data) {
  const inst = data.instance;
  const list = document.getElementById("instance");
  list.replaceChildren();
  fact(list, "Engine", inst.engine + (inst.fallback_enabled ? " (PostgreSQL fallback)" : ""), "engine");
  fact(list, "Circuit", inst.circuit, "circuit");
  fact(list, "Rebuilding sales", inst.rebuilding_sales, "rebuilding_sales");
  fact(list, "Writer queue", inst.writer.queue_depth, "queue_depth");
  fact(list, "Commit p50", ms(inst.writer.commit_latency, "p50_ms"), "commit_p50");
  fact(list, "Commit p99", ms(inst.writer.commit_latency, "p99_ms"), "commit_p99");

  const sales = document.getElementById("sales");
  sales.replaceChildren(...data.sales.map(s => saleCard(s, data.slot_seconds)));
  document.getElementById("no-sales").hidden = data.sales.length > 0;
  const notShown = document.getElementById("not-shown");
  notShown.hidden = data.sales_not_shown === 0;
  notShown.textContent = `${data.sales_not_shown} more sales not shown.`;
  document.getElementById("updated").textContent =
    "Updated " + new Date(data.generated_at).toLocaleTimeString();
}

async function poll() {
  try {
    const response = await fetch("/dashboard/api/overview", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401) {
      // The session ended: back to the login form.
      window.location.assign("/dashboard");
      return;
    }
    if (!response.ok) throw new Error("HTTP " + response.status);
    render(await response.json());
  } catch (error) {
    document.getElementById("updated").textContent = "Cannot reach the service (" + error.message + "); retrying";
  }
  setTimeout(poll, POLL_MS);
}

poll();
