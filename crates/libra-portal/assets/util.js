"use strict";
// Small helpers shared by the pages. Everything the pages show is built with DOM calls and
// text nodes, never innerHTML, so a job name or an output cannot inject markup.
var Libra = window.Libra || {};
window.Libra = Libra;

Libra.h = function (tag, attrs) {
  var el = document.createElement(tag);
  Libra.setAttrs(el, attrs);
  for (var i = 2; i < arguments.length; i++) Libra.append(el, arguments[i]);
  return el;
};

Libra.SVG_NS = "http://www.w3.org/2000/svg";

Libra.s = function (tag, attrs) {
  var el = document.createElementNS(Libra.SVG_NS, tag);
  Libra.setAttrs(el, attrs);
  for (var i = 2; i < arguments.length; i++) Libra.append(el, arguments[i]);
  return el;
};

Libra.setAttrs = function (el, attrs) {
  if (!attrs) return;
  Object.keys(attrs).forEach(function (k) {
    var v = attrs[k];
    if (v === null || v === undefined || v === false) return;
    if (k === "onclick") el.addEventListener("click", v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  });
};

Libra.append = function (el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) { child.forEach(function (c) { Libra.append(el, c); }); return; }
  el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
};

Libra.replace = function (el, child) {
  while (el.firstChild) el.removeChild(el.firstChild);
  Libra.append(el, child);
};

// Money travels as integer cents; show it as credits with two decimals.
Libra.money = function (cents) {
  if (cents === null || cents === undefined) return "-";
  var neg = cents < 0, c = Math.abs(cents);
  var s = Math.floor(c / 100) + "." + String(c % 100).padStart(2, "0");
  return neg ? "-" + s : s;
};

// Parse credits with at most two decimals into cents, without a float round trip, so
// "0.29" is 29 cents exactly. Returns null when the text is not an amount.
Libra.parseMoney = function (text) {
  var m = /^\s*(-?)(\d+)(?:\.(\d{1,2}))?\s*$/.exec(text);
  if (!m) return null;
  var cents = parseInt(m[2], 10) * 100 + parseInt((m[3] || "0").padEnd(2, "0"), 10);
  return m[1] ? -cents : cents;
};

// Durations as the command line takes them: 90, 90s, 10m, 2h, 1d.
Libra.parseDuration = function (text) {
  var m = /^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$/i.exec(text);
  if (!m) return null;
  var mult = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2].toLowerCase()];
  return parseFloat(m[1]) * mult;
};

Libra.duration = function (secs) {
  if (secs === null || secs === undefined || isNaN(secs)) return "-";
  var neg = secs < 0, s = Math.abs(secs);
  var out = s < 60 ? s.toFixed(s < 10 ? 1 : 0) + "s"
    : s < 3600 ? Math.floor(s / 60) + "m " + Math.floor(s % 60) + "s"
    : s < 86400 ? Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m"
    : Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  return neg ? "-" + out : out;
};

Libra.time = function (unix) {
  if (!unix) return "-";
  return new Date(unix * 1000).toLocaleString();
};

Libra.num = function (x, digits) {
  return x === null || x === undefined ? "-" : Number(x).toFixed(digits === undefined ? 2 : digits);
};

// A table with a caption (read first by screen readers) and header cells with scope.
Libra.table = function (caption, headers, rows, emptyText) {
  if (!rows.length) return Libra.h("p", { class: "empty" }, emptyText || "Nothing yet.");
  return Libra.h("table", null,
    Libra.h("caption", null, caption),
    Libra.h("thead", null, Libra.h("tr", null, headers.map(function (t) {
      return Libra.h("th", { scope: "col" }, t);
    }))),
    Libra.h("tbody", null, rows.map(function (cells) {
      return Libra.h("tr", null, cells.map(function (c, i) {
        // The first cell names the row for screen readers.
        return Libra.h(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : null, c);
      }));
    })));
};

// Outcomes go to the one live region and are cleared after a while, so an old message does not
// sit on the next page as if it were news.
Libra.announce = function (text) {
  var el = document.getElementById("status");
  Libra.replace(el, text);
  clearTimeout(Libra.announceTimer);
  Libra.announceTimer = setTimeout(function () { Libra.replace(el, ""); }, 15000);
};

// Not finished: a HELD job (held by its owner, no promise) can still be released or cancelled.
Libra.isActive = function (state) {
  return state === "PENDING" || state === "RUNNING" || state === "SUSPENDED" || state === "HELD";
};

// What a refused update or release would need instead, in words.
Libra.changeAnswer = function (what, a) {
  var j = a.job;
  if (a.accepted) {
    if (a.reason) return "Job " + j.id + " " + what + ": " + a.reason + ".";
    return "Job " + j.id + " " + what + ": due " + Libra.time(j.deadline_at) + ", share " + Libra.num(j.share, 3) +
      " CPU, " + Libra.money(j.cost_cents) + " credits on hold (was " + Libra.money(a.previous_cost_cents) + ").";
  }
  var s = a.suggestion;
  return "Job " + j.id + " " + what + " refused: " + a.reason + "." +
    (s ? " A deadline of " + Libra.time(s.deadline_at) + " and a budget of " + Libra.money(s.budget_cents) +
      " credits would be accepted now." : "");
};

Libra.stateBadge = function (state) {
  return Libra.h("span", { class: "state state-" + state.toLowerCase() }, state);
};
