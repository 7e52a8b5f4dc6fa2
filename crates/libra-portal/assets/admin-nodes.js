"use strict";
// Nodes as a picture: one bar per node as wide as its CPUs, one segment per job as wide as the
// job's share, so a glance shows which node is full and who is on it.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var last = null;
  var W = 640, L = 120, R = 70, ROW = 34, BAR = 22;
  var PALETTE = 8; // colours in style.css: .seg-0 ... .seg-7

  function picture(nodes) {
    var maxCpus = Math.max.apply(null, nodes.map(function (n) { return n.cpus; }).concat([0.001]));
    var scale = (W - L - R) / maxCpus;
    var H = nodes.length * ROW + 24;
    var desc = nodes.map(function (n) {
      return n.name + (n.up ? "" : " (down)") + ": " + n.jobs.length + " jobs, load " + Libra.num(n.load, 2) + " of " + Libra.num(n.cpus, 2) + " CPUs";
    }).join("; ");
    var svg = Libra.s("svg", { viewBox: "0 0 " + W + " " + H, role: "img", id: "nodes-svg", "aria-labelledby": "nodes-title nodes-desc" },
      Libra.s("title", { id: "nodes-title" }, "Shares on each node"),
      Libra.s("desc", { id: "nodes-desc" }, desc || "No nodes."));
    nodes.forEach(function (n, i) {
      var y = i * ROW + 8;
      svg.appendChild(Libra.s("text", { x: L - 8, y: y + BAR / 2 + 5, "text-anchor": "end", class: "axis" }, n.name));
      svg.appendChild(Libra.s("rect", { x: L, y: y, width: n.cpus * scale, height: BAR, class: n.up ? "capacity" : "capacity down" },
        Libra.s("title", null, n.name + ": " + Libra.num(n.cpus, 2) + " CPUs" + (n.up ? "" : ", down"))));
      var x = L;
      n.jobs.forEach(function (j) {
        var w = Math.max(j.share * scale, 1);
        svg.appendChild(Libra.s("rect", { x: x, y: y + 2, width: w, height: BAR - 4, class: "seg seg-" + (j.job % PALETTE), "data-job": j.job },
          Libra.s("title", null, "job " + j.job + ": share " + Libra.num(j.share, 3) + " CPU, " + Libra.num(j.cpu_seconds, 1) + " CPU-s done")));
        if (w > 34) svg.appendChild(Libra.s("text", { x: x + 4, y: y + BAR / 2 + 4, class: "seg-label" }, String(j.job)));
        x += w;
      });
      svg.appendChild(Libra.s("text", { x: L + n.cpus * scale + 6, y: y + BAR / 2 + 5, class: "axis" },
        Libra.num(n.load, 2) + "/" + Libra.num(n.cpus, 2)));
    });
    return svg;
  }

  Libra.views["admin-nodes"] = {
    admin: true,
    show: function () { last = null; },
    refresh: function () {
      return Libra.get("/api/admin/nodes").then(function (nodes) {
        var key = JSON.stringify(nodes.map(function (n) { return [n.name, n.up, n.cpus, n.load, n.jobs, n.price_base, n.mechanism]; }));
        if (key === last) return;
        last = key;
        Libra.replace($("nodes-picture"), nodes.length ? picture(nodes) : Libra.h("p", null, "No node agent has joined yet."));
        Libra.replace($("nodes-table"), Libra.table("Nodes",
          ["Node", "State", "CPUs", "Load", "Jobs", "Enforcement", "PBase", "Last seen"],
          nodes.map(function (n) {
            return [n.name, n.up ? "up" : "down", Libra.num(n.cpus, 2), Libra.num(n.load, 3),
              n.jobs.map(function (j) { return j.job + " (" + Libra.num(j.share, 3) + ")"; }).join(", ") || "-",
              n.mechanism, String(n.price_base), Libra.time(n.last_seen)];
          }), "No nodes."));
      });
    },
  };
})();
