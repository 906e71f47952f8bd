package main

import (
	"errors"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

func startKube(api *toxiproxy.ApiServer, exe, dir, name string, workers int) (backend, error) {
	return nil, errors.New("kube: not yet")
}
