"use strict";
// The only way the pages reach the server: JSON over fetch with the bearer token the user got
// at sign-in. The token lives in sessionStorage so it ends with the tab and is not sent to
// other tabs or kept on disk after the browser closes.
(function () {
  var KEY = "libra.session";

  Libra.session = function () {
    try { return JSON.parse(sessionStorage.getItem(KEY)); } catch (e) { return null; }
  };
  Libra.setSession = function (s) {
    if (s) sessionStorage.setItem(KEY, JSON.stringify(s)); else sessionStorage.removeItem(KEY);
  };

  // An error that carries the HTTP status and the server's own message, shown as is: the
  // server's messages name the field and what is accepted.
  function ApiError(status, message) {
    this.status = status;
    this.message = message;
  }
  ApiError.prototype.toString = function () {
    return this.status ? this.message + " (HTTP " + this.status + ")" : this.message;
  };
  Libra.ApiError = ApiError;

  Libra.api = function (method, path, body, key) {
    var s = Libra.session();
    var headers = { "Accept": "application/json" };
    if (s && s.token) headers["Authorization"] = "Bearer " + s.token;
    if (key) headers["Idempotency-Key"] = key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    }).catch(function (e) {
      throw new ApiError(0, "cannot reach the server: " + e.message);
    }).then(function (r) {
      return r.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        if (!r.ok) {
          var msg = data && data.error ? data.error : (text || r.statusText);
          // A token the server no longer knows: back to the sign-in page. A refused sign-in
          // (no token sent) stays on its page with its own message.
          if (r.status === 401 && s && s.token && Libra.onUnauthorized) Libra.onUnauthorized(msg);
          throw new ApiError(r.status, msg);
        }
        return data;
      });
    });
  };
  Libra.get = function (path) { return Libra.api("GET", path); };
  Libra.post = function (path, body, key) { return Libra.api("POST", path, body === undefined ? {} : body, key); };

  // The idempotency key of a form that spends or gives credit (a job's submission, a credit):
  // the server acts once per key and answers a repeat with what the first request did. One key
  // serves every submit of the form until one is answered or a field changes, so a double click,
  // or a second try after the connection dropped (the server may have acted on the first), is
  // the same request again, not a second job or credit. Random bytes from getRandomValues,
  // which pages served over plain http have too (randomUUID needs a secure context).
  Libra.formKey = function (form) {
    if (!form.libraKeyWatched) {
      form.libraKeyWatched = true;
      var forget = function () { form.libraKey = null; };
      form.addEventListener("input", forget);
      form.addEventListener("change", forget);
    }
    if (!form.libraKey) {
      var bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      form.libraKey = "portal-" + Array.prototype.map.call(bytes, function (b) {
        return (b + 256).toString(16).slice(1);
      }).join("");
    }
    return form.libraKey;
  };
  // The form's request was answered (`e`: the error it ended in, if any): its next submit is a
  // new request. One that never reached an answer (status 0) keeps its key for the retry.
  Libra.formAnswered = function (form, e) {
    if (!e || e.status) form.libraKey = null;
  };
})();
