{
  description = "flyd offline stub of nixpkgs";
  outputs = { self }: let
    system = "@SYSTEM@";
    tools = builtins.path { path = ./tools; name = "flyd-stub-tools"; };
  in {
    legacyPackages.${system}.bashInteractive = derivation {
      name = "bash-interactive-stub";
      inherit system;
      builder = "${tools}/bash";
      args = [ "-c" "${tools}/busybox mkdir -p $out/bin && ${tools}/busybox cp ${tools}/bash $out/bin/bash" ];
    };
  };
}
