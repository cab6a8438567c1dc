// Starts Swagger UI (/docs) or Redoc (/redoc) on the page's mount element. The OpenAPI URL
// comes from its data-openapi-url attribute, so the pages need no inline script. Both
// bundles are served by the app itself (app/assets.py); nothing here reaches another host.
(function () {
  "use strict";
  var swagger = document.getElementById("swagger-ui");
  if (swagger && window.SwaggerUIBundle) {
    window.SwaggerUIBundle({
      url: swagger.dataset.openapiUrl,
      dom_id: "#swagger-ui",
      layout: "BaseLayout",
      presets: [window.SwaggerUIBundle.presets.apis],
      deepLinking: true,
      showCommonExtensions: true,
      // The default would send the spec to validator.swagger.io for a badge.
      validatorUrl: null,
    });
  }
  var redoc = document.getElementById("redoc");
  if (redoc && window.Redoc) {
    window.Redoc.init(redoc.dataset.openapiUrl, { hideDownloadButton: false }, redoc);
  }
})();
