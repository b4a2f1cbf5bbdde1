#!/bin/bash
echo "graden 73"
