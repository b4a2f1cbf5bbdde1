#!/bin/bash
echo "lantren 11"
