"use strict";
// Sweeps are the broker's experiments. This server may not host the broker: the page asks
// GET /api/sweeps and, on 404, says there is no sweeps service rather than showing an empty list.
Libra.views = Libra.views || {};
(function () {
  var box = document.getElementById("sweeps");
  var last = null;

  function cell(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  Libra.views.sweeps = {
    show: function () { last = null; Libra.replace(box, Libra.h("p", null, "Asking the server for sweeps...")); },
    refresh: function () {
      return Libra.get("/api/sweeps").then(function (list) {
        var key = JSON.stringify(list);
        if (key === last) return;
        last = key;
        list = Array.isArray(list) ? list : (list && list.sweeps) || [];
        var cols = list.length ? Object.keys(list[0]) : [];
        Libra.replace(box, Libra.table("Your sweeps", cols, list.map(function (x) {
          return cols.map(function (c) { return cell(x[c]); });
        }), "No sweeps yet. Start one with libra sweep."));
      }).catch(function (e) {
        if (e.status === 404 || e.status === 405) {
          if (last === "none") return;
          last = "none";
          Libra.replace(box, Libra.h("p", { id: "no-sweeps", class: "notice" },
            "No sweeps service on this server. Run parameter sweeps with the libra sweep command."));
        } else {
          last = null;
          Libra.replace(box, Libra.h("p", { class: "bad" }, String(e)));
        }
      });
    },
  };
})();
