#!/bin/bash
echo "mirorr 18"
