"use strict";
// Sign-in: trades the user name and password for an API token; the password is never stored.
Libra.views = Libra.views || {};
(function () {
  var form = document.getElementById("login-form");
  var err = document.getElementById("login-error");
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    Libra.replace(err, "");
    var user = document.getElementById("login-user").value.trim();
    var password = document.getElementById("login-password").value;
    if (!user || !password) { Libra.replace(err, "Give a user name and a password."); return; }
    Libra.post("/api/login", { user: user, password: password }).then(function (r) {
      Libra.setSession({ token: r.token, user: r.user, admin: r.admin });
      document.getElementById("login-password").value = "";
      Libra.announce("Signed in as " + r.user + ".");
      Libra.navigate(r.admin ? "#admin-nodes" : "#jobs");
    }).catch(function (e) { Libra.replace(err, String(e)); });
  });
  Libra.views.login = {
    show: function () { document.getElementById("login-user").focus(); },
  };
})();
