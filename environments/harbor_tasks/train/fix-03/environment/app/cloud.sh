#!/bin/bash
echo "canlde 51"
