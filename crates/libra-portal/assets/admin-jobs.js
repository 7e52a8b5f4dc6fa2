"use strict";
// Everyone's jobs, with the administrator's suspend, resume and cancel.
Libra.views = Libra.views || {};
(function () {
  var last = null;
  var HEAD = ["Job", "User", "Name or command", "State", "Node", "Share (CPU)", "Progress", "To deadline", "Cost", "Actions"];

  function action(j, verb) {
    return Libra.h("button", {
      type: "button", "aria-label": verb + " job " + j.id,
      onclick: function () {
        Libra.post("/api/admin/jobs/" + j.id + "/" + verb.toLowerCase()).then(function (r) {
          Libra.announce("Job " + r.id + " is " + r.state + ".");
        }).catch(function (e) { Libra.announce(String(e)); });
      },
    }, verb);
  }

  Libra.views["admin-jobs"] = {
    admin: true,
    show: function () { last = null; },
    refresh: function () {
      return Libra.get("/api/jobs?all=true&limit=500").then(function (jobs) {
        var key = JSON.stringify(jobs) + Math.floor(Date.now() / 2000);
        if (key === last) return;
        last = key;
        var box = document.getElementById("alljobs-table");
        var focused = document.activeElement && document.activeElement.getAttribute("aria-label");
        Libra.replace(box, Libra.table("Every user's jobs, newest first", HEAD, jobs.map(function (j) {
          var acts = [];
          if (j.state === "RUNNING" || j.state === "PENDING") acts.push(action(j, "Suspend"));
          if (j.state === "SUSPENDED") acts.push(action(j, "Resume"));
          if (Libra.isActive(j.state)) acts.push(action(j, "Cancel"));
          return Libra.jobCells(j, acts, true);
        }), "No jobs yet."));
        Libra.refocus(box, focused);
      });
    },
  };
})();
