// Sends the API token typed on the page (kept for this browser tab only) with every HTMX request.
document.addEventListener("htmx:configRequest", (event) => {
  const field = document.getElementById("api-token");
  if (field && field.value) {
    sessionStorage.setItem("clinrag-token", field.value);
  }
  const token = sessionStorage.getItem("clinrag-token");
  if (token) {
    event.detail.headers["Authorization"] = "Bearer " + token;
  }
});
