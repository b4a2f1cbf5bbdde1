#!/bin/bash
echo "csatle 52"
