"use strict";
// Pricing and policy. The forms are filled from the server when the page opens, and not while
// the administrator edits them; the table of current prices below refreshes by polling.
Libra.views = Libra.views || {};
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var last = null;

  function num(id, label) {
    var v = $(id).value.trim();
    if (!/^\d+(\.\d+)?$/.test(v)) throw new Libra.ApiError(0, label + ": give a number at least 0, e.g. 0.1");
    return parseFloat(v);
  }

  function fillForms(p, pol) {
    $("price-alpha").value = p.params.alpha;
    $("price-beta").value = p.params.beta;
    $("price-gamma").value = p.params.libra_gamma;
    $("price-delta").value = p.params.libra_delta;
    var sel = $("pbase-node");
    Libra.replace(sel, [Libra.h("option", { value: "" }, "Every node")].concat(p.nodes.map(function (n) {
      return Libra.h("option", { value: n.node }, n.node);
    })));
    $("pbase-value").value = p.nodes.length ? p.nodes[0].price_base : "";
    Libra.replace($("policy-select"), pol.available.map(function (name) {
      return Libra.h("option", { value: name, selected: name === pol.policy }, name);
    }));
  }

  function showPrices(p) {
    var key = JSON.stringify(p);
    if (key === last) return;
    last = key;
    Libra.replace($("prices-table"), Libra.table("Prices per CPU-second now", ["Node", "State", "PBase", "Price now", "Load", "CPUs"],
      p.nodes.map(function (n) {
        return [n.node, n.up ? "up" : "down", String(n.price_base), Libra.num(n.price_now, 4), Libra.num(n.load, 3), Libra.num(n.cpus, 2)];
      }), "No nodes."));
  }

  function done(what) {
    return function () { Libra.announce(what); last = null; Libra.views["admin-pricing"].refresh(); };
  }
  function fail(e) { Libra.announce(String(e)); }

  $("pricing-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    try {
      var body = { alpha: num("price-alpha", "α"), beta: num("price-beta", "β"),
        libra_gamma: num("price-gamma", "γ"), libra_delta: num("price-delta", "δ") };
    } catch (e) { fail(e); return; }
    Libra.post("/api/admin/pricing", body).then(done("Pricing saved.")).catch(fail);
  });

  $("pbase-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    try { var pb = num("pbase-value", "PBase"); } catch (e) { fail(e); return; }
    var node = $("pbase-node").value;
    Libra.post("/api/admin/pricing", { node: node || null, price_base: pb })
      .then(done("Base price of " + (node || "every node") + " set to " + pb + ".")).catch(fail);
  });

  $("policy-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var name = $("policy-select").value;
    Libra.post("/api/admin/policy", { policy: name }).then(done("Policy set to " + name + ".")).catch(fail);
  });

  Libra.views["admin-pricing"] = {
    admin: true,
    show: function () {
      last = null;
      return Promise.all([Libra.get("/api/admin/pricing"), Libra.get("/api/admin/policy")])
        .then(function (r) { fillForms(r[0], r[1]); showPrices(r[0]); }).catch(fail);
    },
    refresh: function () { return Libra.get("/api/admin/pricing").then(showPrices); },
  };
})();
