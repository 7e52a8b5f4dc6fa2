"use strict";
// The page's router: the address's hash names the view (#jobs, #job/12, #admin-nodes, ...), so
// the back button, bookmarks and reloads work without a server-side route per page. Views
// refresh by polling every two seconds while visible.
(function () {
  var POLL_MS = 2000;
  var current = null;
  var busy = false;

  function route() {
    var hash = location.hash.replace(/^#/, "");
    var parts = hash.split("/");
    return { name: parts[0] || "", arg: parts.slice(1).join("/") };
  }

  function showNav(s) {
    var nav = document.getElementById("nav");
    nav.hidden = !s;
    Array.prototype.forEach.call(document.querySelectorAll(".admin-only"), function (el) {
      el.hidden = !(s && s.admin);
    });
    Libra.replace(document.getElementById("who"), s ? "Signed in as " + s.user + (s.admin ? " (administrator)" : "") : "");
  }

  function markCurrentLink(name) {
    Array.prototype.forEach.call(document.querySelectorAll("#nav a"), function (a) {
      if (a.getAttribute("href") === "#" + name) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    });
  }

  function render() {
    var s = Libra.session();
    var r = route();
    if (!s) r = { name: "login", arg: "" };
    else if (r.name === "login" || !Libra.views[r.name]) r = { name: s.admin ? "admin-nodes" : "jobs", arg: "" };
    var view = Libra.views[r.name];
    if (view.admin && !(s && s.admin)) {
      // The API would refuse every call anyway; say so instead of showing empty tables.
      Libra.announce("That page is for administrators.");
      r = { name: "jobs", arg: "" };
      view = Libra.views.jobs;
    }
    showNav(s);
    markCurrentLink(r.name);
    Array.prototype.forEach.call(document.querySelectorAll(".view"), function (el) {
      el.hidden = el.id !== "view-" + r.name;
    });
    current = { view: view, arg: r.arg, name: r.name };
    var section = document.getElementById("view-" + r.name);
    var heading = section.querySelector("h2");
    document.title = heading.textContent + " - Libra";
    // Move focus to the new view's heading so keyboard and screen-reader users land on it.
    heading.setAttribute("tabindex", "-1");
    heading.focus();
    if (view.show) view.show(r.arg);
    refresh();
  }

  function refresh() {
    if (!current || !current.view.refresh || busy || document.hidden) return;
    busy = true;
    var arg = current.arg;
    Promise.resolve(current.view.refresh(arg)).catch(function (e) {
      Libra.announce(String(e));
    }).then(function () { busy = false; });
  }

  Libra.navigate = function (hash) {
    if (location.hash === hash) render(); else location.hash = hash;
  };

  Libra.onUnauthorized = function (msg) {
    Libra.setSession(null);
    Libra.announce("Signed out: " + msg);
    Libra.navigate("#login");
  };

  document.getElementById("signout").addEventListener("click", function () {
    Libra.setSession(null);
    Libra.announce("Signed out.");
    Libra.navigate("#login");
  });

  window.addEventListener("hashchange", render);
  document.addEventListener("visibilitychange", refresh);
  setInterval(refresh, POLL_MS);
  render();
})();
